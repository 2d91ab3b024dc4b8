/*
 * Orders, one row per order, computed day by day from the seed.
 */
MODEL (
  name shop.orders, -- the schema is part of the name
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column ts,
    batch_size 31, -- a month of days per batch
  ),
  grain order_id,
  owner 'shop team',
  description 'The orders of each day',
  audits (
    not_null(columns := [order_id, customer_id, ts]),
    unique_values(columns := [order_id]),
    accepted_values(column := status, is_in := ['new', 'paid', 'refunded']),
    assert_positive_amount,
    assert_max_amount(max_amount := 1000),
  ),
  tags [finance],
);

-- SQLMesh's @start_ts and @end_ts: the day's first and last instants.
SELECT
  order_id,
  customer_id,
  amount,
  status,
  ts
FROM shop.raw_orders
WHERE ts BETWEEN @start_ts AND @end_ts;
