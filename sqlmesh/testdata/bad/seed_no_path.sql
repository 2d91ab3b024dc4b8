MODEL (
  name a.b,
  kind SEED (path countries)
);
SELECT 1
