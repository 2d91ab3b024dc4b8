MODEL (
  name orders
);
SELECT 1
