MODEL (
  name a.b,
  audits (x(a b := 1))
);
SELECT 1
