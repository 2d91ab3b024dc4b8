MODEL (
  name a.b,
  owner ,
);
SELECT 1
