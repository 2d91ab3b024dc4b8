MODEL (
  name a.b,
  audits (
    not_null(columns [a, b])
  )
);
SELECT 1
