MODEL (
  name a.b,
  cron '@daily',
  CRON '@hourly'
);
SELECT 1
