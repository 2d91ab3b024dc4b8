AUDIT (
  blocking false
);
SELECT 1
