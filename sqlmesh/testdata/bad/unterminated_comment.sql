MODEL (
  name a.b, /* never
  closed
);
SELECT 1
