AUDIT (name a);
AUDIT (name b);
SELECT 1
