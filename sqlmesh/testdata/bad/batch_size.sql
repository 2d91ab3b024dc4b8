MODEL (
  name a.b,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column ts,
    batch_size 0
  )
);
SELECT 1
