MODEL (
  name a.b,
  kind FULL,
