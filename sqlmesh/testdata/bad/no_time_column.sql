MODEL (
  name a.b,
  kind INCREMENTAL_BY_TIME_RANGE (batch_size 1)
);
SELECT 1
