MODEL (
  'name' a.b
);
SELECT 1
