-- Revenue per day, recomputed whole at each run.
MODEL (
  name shop.daily_revenue,
  kind FULL,
  cron '@daily',
  grain order_date,
  audits (
    NUMBER_OF_ROWS(threshold := 0),
    accepted_range(column := revenue, min_v := 0),
  ),
);

WITH kept AS (
  SELECT * FROM shop.orders WHERE status <> 'refunded' -- a CTE is no model
)
SELECT
  CAST(ts AS DATE) AS order_date,
  count(*) AS orders,
  sum(amount) AS revenue
FROM kept
GROUP BY 1
