-- just a query
SELECT 1
