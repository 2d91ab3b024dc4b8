MODEL (
  name a.b,
  -- kind next
  kind (FULL)
);
SELECT 1
