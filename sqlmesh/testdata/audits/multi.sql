AUDIT (name no_future, defaults (horizon := 1, column := order_ts, labels := ['a', 'b']));
SELECT * FROM @this_model
WHERE @column > now() + INTERVAL (@horizon) DAY;

audit (name "Standalone Check", STANDALONE TRUE, blocking 'TRUE', severity 'high')
SELECT 1 WHERE false;
