-- The shop's own audits: each query's rows are the violations.
AUDIT (
  name assert_positive_amount,
  defaults (column := amount),
);
SELECT *
FROM @this_model
WHERE @column <= 0;

AUDIT (
  name assert_max_amount,
  blocking false, -- only warns
);
SELECT *
FROM @this_model
WHERE amount > @max_amount
