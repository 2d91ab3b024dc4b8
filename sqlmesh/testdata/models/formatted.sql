MODEL (
  name s.m,
  kind incremental_by_time_range (time_column (ds, '%Y-%m-%d')),
  start '2024-03-05T06:07:08+02:00',
  interval_unit 'hour',
)

  WITH x AS (SELECT 1)
  SELECT * FROM x
