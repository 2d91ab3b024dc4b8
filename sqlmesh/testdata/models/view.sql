-- no kind: SQLMesh's default is VIEW
Model
(
  Name "analytics db"."Order Totals",
  OWNER ann,
  dialect duckdb,
  grain order_id
)
SELECT order_id, sum(amount) AS total
FROM sales.orders
GROUP BY order_id
