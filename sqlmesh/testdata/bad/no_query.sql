MODEL (
  name a.b
);

