package warehouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// duckBackend is an embedded DuckDB file (or an in-memory database), owned
// by this process.
type duckBackend struct{}

// openDuckDBWarehouse opens the DuckDB file of dsn (a path, optionally with
// DuckDB options after '?'; "" or ":memory:" is an in-memory database) and
// claims it for w (w.path).
func openDuckDBWarehouse(ctx context.Context, w *Warehouse, dsn string, opts Options) (*sql.DB, error) {
	path, query, _ := strings.Cut(dsn, "?")
	params, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("warehouse: DuckDB DSN %q: %w", dsn, err)
	}
	if !params.Has("threads") {
		n := opts.Threads
		if n <= 0 {
			n = 2
		}
		params.Set("threads", strconv.Itoa(n))
	}
	if !params.Has("memory_limit") {
		m := opts.MemoryLimit
		if m == "" {
			m = "2GB"
		}
		params.Set("memory_limit", m)
	}
	if path != "" && path != ":memory:" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("warehouse: %s: %w", path, err)
		}
		openFilesMu.Lock()
		if openFiles[abs] {
			openFilesMu.Unlock()
			return nil, fmt.Errorf("%w: %s is already open in this process", ErrLocked, abs)
		}
		openFiles[abs] = true
		openFilesMu.Unlock()
		w.path = abs
	}
	db, err := openDuckDB(path + "?" + params.Encode())
	if err == nil {
		err = db.PingContext(ctx)
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		w.release()
		if isLockError(err) {
			return nil, fmt.Errorf("%w: %s is held by another process; stop it or go through it: %w", ErrLocked, path, err)
		}
		if errors.Is(err, ErrNoCgo) {
			return nil, err
		}
		return nil, fmt.Errorf("warehouse: open DuckDB %s: %w", path, err)
	}
	return db, nil
}

func isLockError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Could not set lock") || strings.Contains(s, "Conflicting lock")
}

func (duckBackend) engine() string { return "duckdb" }

func (duckBackend) ddlBounds() (string, string, []any) {
	return paramStart, paramEnd, []any{epoch, epoch}
}

// lockTable: one process owns a DuckDB file; in-process writers of a
// slice already take turns (lockInterval).
func (duckBackend) lockTable(context.Context, execer, string) error { return nil }

func (duckBackend) beginPromote(context.Context, execer) error { return nil }

// swapView: CREATE OR REPLACE VIEW swaps a view, whatever its columns.
func (duckBackend) swapView(ctx context.Context, x execer, view, sel string) error {
	_, err := x.ExecContext(ctx, "CREATE OR REPLACE VIEW "+view+" AS "+sel)
	return err
}

// metaIndexes: DuckDB prunes the writers' scans with its zone maps.
func (duckBackend) metaIndexes(context.Context, execer) error { return nil }

// viewsReading: DuckDB records no dependencies; a view reads the table
// when its text names it.
func (duckBackend) viewsReading(ctx context.Context, db querier, table string) ([]string, error) {
	rs, err := db.QueryContext(ctx, "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1, 2")
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var schema, view, text string
		if err := rs.Scan(&schema, &view, &text); err != nil {
			return nil, err
		}
		if mentions(text, table) {
			out = append(out, schema+"."+view)
		}
	}
	return out, rs.Err()
}

func (duckBackend) beginReadOnly() string { return "BEGIN TRANSACTION READ ONLY" }
