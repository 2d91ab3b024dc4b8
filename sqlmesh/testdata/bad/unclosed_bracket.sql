MODEL (
  name a.b,
  grain [a, b
