MODEL (
  name a.b,
  columns (
    id INT,
    amount
  )
);
SELECT 1
