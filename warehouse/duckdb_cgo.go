//go:build cgo

package warehouse

import (
	"database/sql"

	// The embedded DuckDB driver ("duckdb"); the only file that imports it.
	_ "github.com/duckdb/duckdb-go/v2"
)

func openDuckDB(dsn string) (*sql.DB, error) { return sql.Open("duckdb", dsn) }
