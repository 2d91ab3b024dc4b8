AUDIT (name a);
SELECT 1;

AUDIT (name A);
SELECT 2;
