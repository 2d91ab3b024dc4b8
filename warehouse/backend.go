package warehouse

import (
	"context"
	"strings"
)

// backend is the engine-specific part of a Warehouse, one implementation
// per engine (duckdb.go, postgres.go), chosen once by Open from the DSN's
// scheme. Everything else in this package is written once for both:
// behaviour that differs between the engines is a method here, never a
// test of the engine's name.
type backend interface {
	// engine names the engine: "duckdb" or "postgres".
	engine() string
	// ddlBounds is how @start_ts and @end_ts are written in a snapshot
	// table's creation (CREATE TABLE … AS … LIMIT 0), and the arguments
	// bound to them: parameters where DDL binds them (DuckDB), else a
	// typed NULL constant (Postgres: DDL takes no parameters).
	ddlBounds() (start, end string, args []any)
	// lockTable makes the writers of table take turns across processes,
	// inside x's transaction (nothing where one process owns the data).
	lockTable(ctx context.Context, x execer, table string) error
	// beginPromote prepares a promotion's transaction (Postgres: a lock
	// timeout, so a reader of several views never deadlocks with it).
	beginPromote(ctx context.Context, x execer) error
	// swapView points view (schema-qualified, quoted) at sel, inside x's
	// transaction.
	swapView(ctx context.Context, x execer, view, sel string) error
	// metaIndexes creates the indexes of the writers' table (MetaSchema).
	metaIndexes(ctx context.Context, x execer) error
	// viewsReading lists the views (schema.view) that read the snapshot
	// table.
	viewsReading(ctx context.Context, db querier, table string) ([]string, error)
	// beginReadOnly is the statement that starts a read-only transaction.
	beginReadOnly() string
}

// isPostgresDSN reports whether dsn names a Postgres database (a
// postgres:// or postgresql:// URL); anything else is a DuckDB path.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// mentions reports whether sql names the identifier ident as a whole word
// (case-insensitively; a false positive only keeps a table).
func mentions(sql, ident string) bool {
	s, id := strings.ToLower(sql), strings.ToLower(ident)
	for off := 0; ; {
		k := strings.Index(s[off:], id)
		if k < 0 {
			return false
		}
		i, j := off+k, off+k+len(id)
		if (i == 0 || !isIdentChar(s[i-1])) && (j == len(s) || !isIdentChar(s[j])) {
			return true
		}
		off = i + 1
	}
}
