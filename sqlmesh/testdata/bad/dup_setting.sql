MODEL (
  name a.b,
  kind INCREMENTAL_BY_TIME_RANGE (time_column a, TIME_COLUMN := b)
);
SELECT 1
