MODEL (
  name a.b,
  kind FULL FULL
);
SELECT 1
