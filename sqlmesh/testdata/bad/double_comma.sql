MODEL (
  name a.b,
  grain [a,, b]
);
SELECT 1
