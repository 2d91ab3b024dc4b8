AUDIT (
  name a,
  blocking maybe
);
SELECT 1
