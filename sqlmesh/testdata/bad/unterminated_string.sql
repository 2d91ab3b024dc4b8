MODEL (
  name a.b,
  description 'it''s open
);
SELECT 1
