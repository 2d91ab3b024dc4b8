package warehouse

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	if !params.Has("max_temp_directory_size") {
		m := opts.MaxTempSize
		if m == "" {
			m = DefaultMaxTempSize
		}
		params.Set("max_temp_directory_size", m)
	}
	// Least privilege, for the whole database: DuckDB keeps these per
	// database instance, not per connection (enable_external_access can
	// only be turned off while it runs, lock_configuration freezes every
	// setting for every connection). tidemark reads no file through SQL,
	// so its own statements lose nothing; model SQL and queries cannot
	// read or write the host's files (read_text, read_csv, glob, COPY),
	// ATTACH another database, INSTALL or LOAD an extension, or change a
	// setting back (SET fails).
	for k, v := range duckLocked {
		if params.Has(k) && params.Get(k) != v {
			return nil, fmt.Errorf("warehouse: DuckDB DSN %q sets %s: tidemark sets it to %s (least privilege) and no DSN may change it", dsn, k, v)
		}
		params.Set(k, v)
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
	// The configuration is locked once the zone is set (below).
	params.Del("lock_configuration")
	db, err := openDuckDB(path + "?" + params.Encode())
	if err == nil {
		err = utcLocked(ctx, db)
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

// utcLocked sets the database's time zone to UTC, then locks its
// configuration (lock_configuration), before any other statement runs.
// Intervals are UTC: a time.Time bound as a parameter arrives as a
// TIMESTAMP WITH TIME ZONE, and its cast to TIMESTAMP (the macros', the
// writes' bounds) is read in the zone setting, which ICU takes from the
// process's TZ: under TZ=America/New_York a day's write held 19 of its 24
// hours. TimeZone is ICU's setting, registered once the database is up,
// so it cannot go in the DSN; a build without ICU has no zone to
// convert to and refuses the setting, which is then not needed.
func utcLocked(ctx context.Context, db *sql.DB) error {
	if err := db.PingContext(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "SET GLOBAL TimeZone = 'UTC'"); err != nil && !strings.Contains(err.Error(), "unrecognized configuration") {
		return fmt.Errorf("setting the time zone to UTC: %w", err)
	}
	if _, err := db.ExecContext(ctx, "SET GLOBAL lock_configuration = true"); err != nil {
		return fmt.Errorf("locking the configuration: %w", err)
	}
	return nil
}

// duckLocked are the settings every DuckDB warehouse opens with.
var duckLocked = map[string]string{
	"enable_external_access":       "false",
	"autoinstall_known_extensions": "false",
	"autoload_known_extensions":    "false",
	"allow_community_extensions":   "false",
	"lock_configuration":           "true",
}

func isLockError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Could not set lock") || strings.Contains(s, "Conflicting lock")
}

func (duckBackend) engine() string { return "duckdb" }

// rowHash: DuckDB's hash of several values (a UBIGINT).
func (duckBackend) rowHash(cols []string) string { return "hash(" + strings.Join(cols, ", ") + ")" }

// hourBucket: integer arithmetic on the epoch (date_trunc costs several
// times more over millions of rows).
func (duckBackend) hourBucket(col string) string { return "epoch_us(" + col + ") // 3600000000" }

func (duckBackend) ddlBounds() (string, string, []any) {
	return paramStart, paramEnd, []any{epoch, epoch}
}

// batchConcurrency: one statement of DuckDB's already uses every thread
// it has (Options.Threads), so batches of a model run one at a time.
func (duckBackend) batchConcurrency() int { return 1 }

// soleWriter: one process owns a DuckDB file.
func (duckBackend) soleWriter() bool { return true }

// writeRange: one process owns a DuckDB file, and in-process writers of
// overlapping ranges already take turns (lockInterval), so there is no
// lock to take; DuckDB's own conflict on a record two writes both delete
// is retried (retryableWrite). The sandbox is the database's own (Open),
// and the timeout the context's, which the driver interrupts: nothing to
// set per statement. Each statement is its own call (no round trips to
// save in an embedded engine).
func (d duckBackend) writeRange(ctx context.Context, db *sql.DB, rw rangeWrite) (int64, error) {
	var rows int64
	err := runTx(ctx, db, "BEGIN", true, func(c *sql.Conn) error {
		if rw.del.sql != "" {
			if _, err := c.ExecContext(ctx, rw.del.sql, rw.del.args...); err != nil {
				return err
			}
		}
		n, err := d.execOne(ctx, c, rw.ins, rw.r.Start, rw.r.End)
		if err != nil {
			return err
		}
		rows = n
		rec := rw.rec
		rec.Rows = n
		return recordWrite(ctx, c, rec, rw.del.sql != "")
	})
	return rows, err
}

// lockWhole: one process owns a DuckDB file, and its writes of a table
// already take turns (lockInterval).
func (duckBackend) lockWhole(context.Context, *sql.Conn, string) error { return nil }

func (duckBackend) tableComment(ctx context.Context, db querier, table string) (string, error) {
	return queryComment(ctx, db, "SELECT comment FROM duckdb_tables() WHERE schema_name = $1 AND table_name = $2", Schema, table)
}

func (duckBackend) beginPromote(context.Context, execer) error { return nil }

// swapView: CREATE OR REPLACE VIEW swaps a view, whatever its columns.
func (duckBackend) swapView(ctx context.Context, x execer, schema, name, sel string) error {
	_, err := x.ExecContext(ctx, "CREATE OR REPLACE VIEW "+qualified(schema, name)+" AS "+sel)
	return err
}

// metaIndexes: DuckDB prunes the writers' scans with its zone maps.
func (duckBackend) metaIndexes(context.Context, execer) error { return nil }

// viewsReading: DuckDB records no dependencies; a view reads the table
// when its text names it (but for the table itself: a view model's view,
// whose text names it as it is created).
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
		if mentions(text, table) && !(schema == Schema && view == table) {
			out = append(out, schema+"."+view)
		}
	}
	return out, rs.Err()
}

func (duckBackend) beginReadOnly() string { return "BEGIN TRANSACTION READ ONLY" }

// sandbox: DuckDB's bounds are the database's (Open); the statement's time
// is bounded by its context, which the driver interrupts.
func (duckBackend) sandbox(context.Context, *sql.Conn, time.Duration) error { return nil }

func (duckBackend) unsandbox(context.Context, *sql.Conn) error { return nil }

func (duckBackend) adoptTable(context.Context, *sql.Conn, string, string) error { return nil }

func (duckBackend) schemaCreated(context.Context, execer) error { return nil }

// prepareOne prepares q on the driver's connection as one statement: the
// driver's Prepare refuses a text of several statements before running
// any (its PrepareContext, which database/sql calls, would run all but
// the last one).
func prepareOne(dc any, q string) (driver.Stmt, error) {
	conn, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("warehouse: DuckDB connection %T", dc)
	}
	st, err := conn.Prepare(q)
	if err != nil {
		return nil, fmt.Errorf("%w (exactly one statement runs)", err)
	}
	return st, nil
}

func namedArgs(args []any) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return out
}

func (duckBackend) execOne(ctx context.Context, c *sql.Conn, q string, args ...any) (int64, error) {
	var n int64
	err := c.Raw(func(dc any) error {
		st, err := prepareOne(dc, q)
		if err != nil {
			return err
		}
		defer st.Close()
		res, err := st.(driver.StmtExecContext).ExecContext(ctx, namedArgs(args))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

func (duckBackend) queryOne(ctx context.Context, c *sql.Conn, q string, args []any, each func([]string, []any) (bool, error)) error {
	return c.Raw(func(dc any) error {
		st, err := prepareOne(dc, q)
		if err != nil {
			return err
		}
		defer st.Close()
		rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, namedArgs(args))
		if err != nil {
			return err
		}
		defer rows.Close()
		cols := rows.Columns()
		dest := make([]driver.Value, len(cols))
		for {
			if err := rows.Next(dest); err == io.EOF {
				return ctx.Err()
			} else if err != nil {
				return err
			}
			row := make([]any, len(dest))
			for i, v := range dest {
				if b, ok := v.([]byte); ok {
					v = bytes.Clone(b)
				}
				row[i] = v
			}
			if more, err := each(cols, row); err != nil || !more {
				return err
			}
		}
	})
}

// limitRows wraps q in SELECT * FROM (q) LIMIT n when DuckDB's parser
// (json_serialize_sql, which serializes SELECT statements only) reads it
// as exactly one SELECT; the subquery's order is kept (DuckDB preserves
// insertion order). Any other statement (EXPLAIN, a PRAGMA-like SHOW) is
// run as it is: its answer is small.
func (duckBackend) limitRows(ctx context.Context, c *sql.Conn, q string, n int) (string, error) {
	one := func(text string) (bool, error) {
		var js string
		if err := c.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(CAST($1 AS VARCHAR)) AS VARCHAR)", text).Scan(&js); err != nil {
			return false, err
		}
		var parsed struct {
			Error      bool              `json:"error"`
			Statements []json.RawMessage `json:"statements"`
		}
		if err := json.Unmarshal([]byte(js), &parsed); err != nil {
			return false, fmt.Errorf("reading DuckDB's parse of the query: %w", err)
		}
		return !parsed.Error && len(parsed.Statements) == 1, nil
	}
	if ok, err := one(q); err != nil || !ok {
		return q, err
	}
	// The wrapped text must be one SELECT too (a trailing ';' is not).
	wrapped := fmt.Sprintf("SELECT * FROM (%s\n) tidemark_query LIMIT %d", strings.TrimRight(q, "; \t\r\n"), n)
	if ok, err := one(wrapped); err != nil || !ok {
		return q, err
	}
	return wrapped, nil
}
