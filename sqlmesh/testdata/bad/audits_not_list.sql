MODEL (
  name a.b,
  audits not_null
);
SELECT 1
