MODEL (
  name a.b,
  cron daily
);
SELECT 1
