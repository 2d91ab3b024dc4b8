model (name Ref.Countries, kind SEED (path '../seeds/countries.csv'), columns (code VARCHAR(2), name TEXT)); SELECT 1
