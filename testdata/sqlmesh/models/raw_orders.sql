-- The shop's orders as the till exports them: a seed.
MODEL (
  name shop.raw_orders,
  kind SEED (
    path '../seeds/raw_orders.csv',
  ),
  grain order_id,
  columns (
    order_id INT,
    customer_id INT,
    amount INT,
    status TEXT,
    ts TIMESTAMP, /* trailing comma: SQLMesh allows it */
  ),
);
