package warehouse

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"time"
)

// backend is the engine-specific part of a Warehouse, one implementation
// per engine (duckdb.go, postgres.go), chosen once by Open from the DSN's
// scheme. Everything else in this package is written once for both:
// behaviour that differs between the engines is a method here, never a
// test of the engine's name.
type backend interface {
	// engine names the engine: "duckdb" or "postgres".
	engine() string
	// batchConcurrency is how many batches of one model are written at
	// once when the model does not say (batch_concurrency).
	batchConcurrency() int
	// ddlBounds is how @start_ts and @end_ts are written in a snapshot
	// table's creation (CREATE TABLE … AS … LIMIT 0), and the arguments
	// bound to them: parameters where DDL binds them (DuckDB), else a
	// typed NULL constant (Postgres: DDL takes no parameters).
	ddlBounds() (start, end string, args []any)
	// soleWriter reports whether this process is the only writer of the
	// data (DuckDB: one process owns the file), so that what it knows of
	// its own writes is all there is to know.
	soleWriter() bool
	// writeRange runs rw, one write of a range of a snapshot table
	// (WriteInterval), as one transaction on a connection of db and
	// returns the rows inserted; it commits only when it returns nil. In
	// order: the range's turn among writers of overlapping ranges across
	// processes (nothing where one process owns the data; writers of
	// disjoint ranges need not wait), rw.del, rw.ins as exactly one
	// statement in the sandbox (within rw.timeout), then the writer
	// records (rw.rec replacing the records it overlaps, under the
	// records' own turn among writers of the table across processes,
	// taken last: two writes of disjoint ranges may both trim one older
	// record).
	writeRange(ctx context.Context, db *sql.DB, rw rangeWrite) (int64, error)
	// lockWhole, in c's transaction, takes the turn of a computation of a
	// whole model's object (table) among the writers of other processes
	// (nothing where one process owns the data; Postgres: an advisory
	// lock of its name, which readers do not wait for), until the
	// transaction ends.
	lockWhole(ctx context.Context, c *sql.Conn, table string) error
	// tableComment is the comment of the snapshot table ("" when it has
	// none).
	tableComment(ctx context.Context, db querier, table string) (string, error)
	// beginPromote prepares a promotion's transaction (Postgres: a lock
	// timeout, so a reader of several views never deadlocks with it).
	beginPromote(ctx context.Context, x execer) error
	// swapView points view name of schema (the environment) at sel,
	// inside x's transaction; the sandbox may read the view (a query of
	// an environment runs there).
	// transaction.
	swapView(ctx context.Context, x execer, schema, name, sel string) error
	// metaIndexes creates the indexes of the writers' table (MetaSchema).
	metaIndexes(ctx context.Context, x execer) error
	// viewsReading lists the views (schema.view) that read the snapshot
	// table.
	viewsReading(ctx context.Context, db querier, table string) ([]string, error)
	// beginReadOnly is the statement that starts a read-only transaction.
	beginReadOnly() string

	// The least privilege where model SQL and queries run.

	// sandbox makes the statements that follow in c's transaction run with
	// the least privilege (Postgres: SET LOCAL ROLE SandboxRole) and at
	// most timeout each (statement_timeout). DuckDB's bounds are the
	// database's own (Open): nothing to do.
	sandbox(ctx context.Context, c *sql.Conn, timeout time.Duration) error
	// unsandbox ends sandbox: tidemark's own statements follow.
	unsandbox(ctx context.Context, c *sql.Conn) error
	// adoptTable, after a snapshot table's creation in the sandbox (and
	// unsandbox), gives tidemark the table and the sandbox what it needs
	// of it (Postgres: owner, INSERT), and the engine what a write of a
	// range needs to find its rows (Postgres: an index on timeColumn, or
	// every batch's DELETE scans the whole table).
	adoptTable(ctx context.Context, c *sql.Conn, table, timeColumn string) error
	// schemaCreated gives the sandbox what it needs of schema Schema.
	schemaCreated(ctx context.Context, x execer) error
	// execOne runs q, a statement built from model SQL, on c as exactly
	// one statement (a DuckDB prepared statement, which holds one; the
	// Postgres extended protocol, which refuses several), and returns the
	// rows it affected.
	execOne(ctx context.Context, c *sql.Conn, q string, args ...any) (int64, error)
	// queryOne runs q on c as exactly one statement and hands each row to
	// each, in order, until each returns false; it stops reading there.
	queryOne(ctx context.Context, c *sql.Conn, q string, args []any, each func(cols []string, row []any) (bool, error)) error
	// limitRows is q (a user's read-only statement) made to produce at
	// most n rows where the engine would otherwise compute the whole
	// answer before the first row is read (DuckDB's Go driver
	// materializes a result: a SELECT the engine's parser reads as one
	// statement is wrapped in a LIMIT); q itself where rows stream
	// (Postgres) or the statement is not a SELECT.
	limitRows(ctx context.Context, c *sql.Conn, q string, n int) (string, error)
	// rowHash is an expression hashing a row of the given (quoted)
	// columns to an integer, NULLs included, for a diff's bucket
	// summaries (DiffTables): equal rows hash equal.
	rowHash(cols []string) string
	// hourBucket is an expression giving the hour (a BIGINT count of
	// hours since 1970-01-01 UTC) a time column's value falls in, for a
	// diff's bucket summaries: cheaper than date_trunc on DuckDB.
	hourBucket(col string) string
}

// inTx runs fn in one transaction on one connection, begun by begin; it
// commits when fn succeeds and rolls back otherwise. A connection that
// cannot roll back is discarded.
func (w *Warehouse) inTx(ctx context.Context, begin string, fn func(c *sql.Conn) error) error {
	return runTx(ctx, w.db, begin, true, fn)
}

// inReadOnlyTx runs fn in a read-only transaction, rolled back afterwards
// (a query that stopped reading early may have cost its connection:
// nothing is lost).
func (w *Warehouse) inReadOnlyTx(ctx context.Context, fn func(c *sql.Conn) error) error {
	return runTx(ctx, w.db, w.b.beginReadOnly(), false, fn)
}

// runTx runs fn in one transaction on one connection of db, begun by
// begin, and commits it when commit is set and fn succeeds; otherwise it
// rolls back. A connection that cannot roll back is discarded.
func runTx(ctx context.Context, db *sql.DB, begin string, commit bool, fn func(c *sql.Conn) error) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, begin); err != nil {
		return err
	}
	if err = fn(c); err == nil && commit {
		_, err = c.ExecContext(ctx, "COMMIT")
		if err == nil {
			return nil
		}
	}
	if _, rerr := c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
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

// queryComment runs q, which selects one table comment (no row, or NULL:
// none), the backends' tableComment.
func queryComment(ctx context.Context, db querier, q string, args ...any) (string, error) {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	var comment sql.NullString
	for rs.Next() {
		if err := rs.Scan(&comment); err != nil {
			return "", err
		}
	}
	return comment.String, rs.Err()
}
