AUDIT (
  name a,
  defaults (threshold 1)
);
SELECT 1
