MODEL (
  name warehouse.sales.daily,
  kind FULL,
  cron '0 * * * *',
  start 1704067200000,
  grain (day, region),
  depends_on (sales.orders),
  audits [unique_values(columns := (day, region), blocking := false, rate := 0.5, strict := TRUE)],
);
SELECT 1 AS x
