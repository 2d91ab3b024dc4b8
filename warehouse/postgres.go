package warehouse

import (
	"context"
	"database/sql"
	"fmt"
)

// pgBackend is a Postgres database, shared by any number of processes.
type pgBackend struct{}

// openPostgres opens the Postgres database of dsn (a postgres:// URL).
func openPostgres(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("warehouse: open postgres: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("warehouse: open postgres: %w", err)
	}
	return db, nil
}

func (pgBackend) engine() string { return "postgres" }

// ddlBounds: DDL takes no parameters; the table is created from LIMIT 0,
// so the bounds' values do not matter.
func (pgBackend) ddlBounds() (string, string, []any) { return nullTS, nullTS, nil }

// lockTable: read committed lets two processes' DELETE+INSERT of one
// slice interleave into duplicates: writers of one table take turns
// across processes (a transaction-scoped advisory lock).
func (pgBackend) lockTable(ctx context.Context, x execer, table string) error {
	_, err := x.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "tidemark.write:"+table)
	return err
}

// beginPromote: DROP VIEW locks each view until commit. A reader holding
// one view while waiting for another swapped one would deadlock with the
// promotion (Postgres then kills one of them after deadlock_timeout,
// maybe the reader): the promotion gives up its locks first and retries.
func (pgBackend) beginPromote(ctx context.Context, x execer) error {
	_, err := x.ExecContext(ctx, "SET LOCAL lock_timeout = '200ms'")
	return err
}

// swapView: Postgres refuses CREATE OR REPLACE VIEW when the columns
// change: DROP and CREATE in the same transaction.
func (pgBackend) swapView(ctx context.Context, x execer, view, sel string) error {
	if _, err := x.ExecContext(ctx, "DROP VIEW IF EXISTS "+view); err != nil {
		return err
	}
	_, err := x.ExecContext(ctx, "CREATE VIEW "+view+" AS "+sel)
	return err
}

// metaIndexes: every write looks up the records of its table's slice;
// Postgres needs an index for that.
func (pgBackend) metaIndexes(ctx context.Context, x execer) error {
	_, err := x.ExecContext(ctx, "CREATE INDEX IF NOT EXISTS intervals_by_table ON "+qualified(MetaSchema, IntervalsTable)+" (table_name, holds_start)")
	return err
}

// viewsReading: Postgres records which views read a table (pg_depend).
func (pgBackend) viewsReading(ctx context.Context, db querier, table string) ([]string, error) {
	rs, err := db.QueryContext(ctx, `SELECT DISTINCT v.relnamespace::regnamespace::text || '.' || v.relname
		FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class
		WHERE d.refobjid = to_regclass($1) AND v.oid <> d.refobjid ORDER BY 1`, qualified(Schema, table))
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var v string
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rs.Err()
}

func (pgBackend) beginReadOnly() string { return "BEGIN READ ONLY" }
