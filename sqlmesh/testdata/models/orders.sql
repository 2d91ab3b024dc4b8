/*
 * Daily orders, one row per order line.
 * Written for tidemark's tests.
 */
-- owner: data team
MODEL (
  name sales.orders, -- the schema is part of the name
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_ts,
    batch_size 7,
    lookback 2, /* re-run two days */
    batch_concurrency := 3,
  ),
  cron '@daily',
  start '2024-01-01',
  owner 'ann',
  description 'Orders; it''s the "main" fact table',
  grain [order_id, line_no],
  depends_on [raw.orders, "raw"."order lines"],
  audits (
    NUMBER_OF_ROWS(threshold := 0),
    not_null(columns := [order_id, amount]),
    accepted_values(column := status, is_in := ('new', 'paid', 'it''s')),
    assert_positive_amount,
  ),
  columns (
    order_id INT,
    line_no INTEGER,
    amount DECIMAL(12, 2),
    status TEXT,
    order_ts TIMESTAMP,
  ),
  TAGS [finance, "daily"],
  physical_properties (retention := (days := 30, note := 'a (b) [c]')),
);

-- the query is kept verbatim, comments included
SELECT o.order_id, o.line_no, o.amount, o.status, o.order_ts
FROM raw.orders AS o
WHERE o.order_ts BETWEEN @start_ts AND @end_ts;
