-- What each customer paid: a view, in another schema.
MODEL (
  name reporting.customer_totals,
  kind VIEW,
  grain customer_id
);

SELECT
  o.customer_id,
  count(*) AS orders,
  sum(o.amount) AS spent
FROM shop.orders AS o
WHERE o.status = 'paid'
GROUP BY o.customer_id
