MODEL (
  name a.b,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, lookback 'two')
);
SELECT 1
