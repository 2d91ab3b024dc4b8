MODEL (
  name a.b,
  start 'yesterday'
);
SELECT 1
