MODEL (
  name a.b
  kind FULL
);
SELECT 1
