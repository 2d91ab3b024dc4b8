-- a standalone audit
AUDIT (
  name assert_positive_amount,
  blocking false,
  dialect duckdb,
  description 'amounts are positive',
);
SELECT * FROM @this_model WHERE amount <= 0
