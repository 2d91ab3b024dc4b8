package warehouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	// The Postgres driver ("pgx") for database/sql.
	_ "github.com/jackc/pgx/v5/stdlib"
)

var (
	// ErrNoCgo is returned by Open of a DuckDB path in a build without cgo.
	// The caller should use a postgres:// warehouse or rebuild with cgo.
	ErrNoCgo = errors.New("warehouse: this tidemark was built without cgo: the embedded DuckDB warehouse is unavailable; use a postgres:// warehouse")
	// ErrLocked is returned by Open when another process (or another Open
	// in this process) owns the DuckDB file. Stop the owner, or go through
	// it (its query command), or use a postgres:// warehouse.
	ErrLocked = errors.New("warehouse: the DuckDB file is owned by another process (one process owns a DuckDB file)")
	// ErrInUse is returned by DropTable when a view reads the table; the
	// caller should keep the table (it is promoted somewhere).
	ErrInUse = errors.New("warehouse: table is read by a view")
	// ErrNotReadOnly is returned by Query for a statement that may write.
	ErrNotReadOnly = errors.New("warehouse: only read-only statements are allowed")
	// ErrTimeout is returned by a model's computation that ran longer than
	// its timeout (Model.Timeout, Options.ModelTimeout): it was cancelled.
	// Running it again will take as long; the caller should fail the work.
	ErrTimeout = errors.New("warehouse: the model's computation exceeded its timeout and was cancelled")
)

// writeAttempts bounds the tries of one interval write that hits write
// conflicts.
const writeAttempts = 8

// Options are the bounds of a warehouse. Zero values take the defaults.
type Options struct {
	// Threads is DuckDB's worker threads; 0 means 2. A DuckDB DSN that
	// sets threads itself wins (so for MemoryLimit and MaxTempSize).
	Threads int
	// MemoryLimit is DuckDB's memory limit (e.g. "2GB"); "" means "2GB".
	MemoryLimit string
	// MaxTempSize bounds DuckDB's temporary files (spilled intermediate
	// results); "" means DefaultMaxTempSize.
	MaxTempSize string
	// ModelTimeout bounds one computation of a model (an interval's write,
	// a table's creation, a verification) unless the model sets its own
	// (Model.Timeout); 0 means DefaultModelTimeout. The computation is
	// cancelled through the driver (DuckDB interrupts it; Postgres also
	// gets it as statement_timeout) and fails with ErrTimeout.
	ModelTimeout time.Duration
	// QueryLimits bound Query's answer; zero fields take DefaultLimits'.
	QueryLimits Limits
}

// The defaults of Options.
const (
	DefaultMaxTempSize  = "4GB"
	DefaultModelTimeout = 10 * time.Minute
)

// Warehouse is an open warehouse. Its methods are safe for concurrent use.
type Warehouse struct {
	db   *sql.DB
	b    backend
	path string // the DuckDB file this process owns, "" otherwise
	dsn  string

	mu       sync.Mutex
	tables   map[string]*tableState // snapshot tables known to exist
	creating map[string]*sync.Mutex // EnsureTable's lock per table
	envs     map[string]*sync.Mutex // promotion lock per environment
	writing  map[string][]Range     // intervals being written, per table
	cond     *sync.Cond             // signalled when writing shrinks
	// metaReady: the writers' table (MetaSchema) is known to exist.
	metaReady bool
	// schemaReady: schema Schema is known to exist (and granted).
	schemaReady bool

	modelTimeout time.Duration
	limits       Limits
}

// openFiles are the DuckDB files opened by this process (absolute paths).
var (
	openFilesMu sync.Mutex
	openFiles   = map[string]bool{}
)

// Open opens the warehouse at dsn: a postgres:// or postgresql:// URL is a
// Postgres database; anything else is a DuckDB file path, optionally with
// DuckDB options after '?' ("" or ":memory:" is an in-memory database).
func Open(ctx context.Context, dsn string, opts Options) (*Warehouse, error) {
	w := &Warehouse{
		tables:   map[string]*tableState{},
		creating: map[string]*sync.Mutex{},
		envs:     map[string]*sync.Mutex{},
		writing:  map[string][]Range{},
	}
	w.cond = sync.NewCond(&w.mu)
	w.dsn = dsn
	w.modelTimeout = opts.ModelTimeout
	if w.modelTimeout <= 0 {
		w.modelTimeout = DefaultModelTimeout
	}
	w.limits = opts.QueryLimits.orDefault()
	// The one place the engine is chosen.
	var err error
	if isPostgresDSN(dsn) {
		w.b = pgBackend{}
		w.db, err = openPostgres(ctx, dsn)
	} else {
		w.b = duckBackend{}
		w.db, err = openDuckDBWarehouse(ctx, w, dsn, opts)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// epoch is the value both bounds take where a statement needs some.
var epoch = time.Unix(0, 0).UTC()

// release gives up this warehouse's claim on its DuckDB file (once: a
// second Close must not free a later owner's claim).
func (w *Warehouse) release() {
	openFilesMu.Lock()
	defer openFilesMu.Unlock()
	if w.path != "" {
		delete(openFiles, w.path)
		w.path = ""
	}
}

// Close closes the warehouse; a DuckDB file is free for another owner
// afterwards.
func (w *Warehouse) Close() error {
	err := w.db.Close()
	w.release()
	return err
}

// Engine names the engine: "duckdb" or "postgres".
func (w *Warehouse) Engine() string { return w.b.engine() }

// DB is the underlying handle, for tests and tools that know the engine.
func (w *Warehouse) DB() *sql.DB { return w.db }

// tableState is what this process knows of a snapshot table that
// EnsureTable found or made.
type tableState struct {
	// recorded: every row of the table was written with its writer record
	// (the table carries recordedComment), so a range that no record
	// overlaps holds no row.
	recorded bool
	// claimed, where the backend is the data's sole writer and the table
	// is recorded: sorted, disjoint ranges that cover every record's
	// Holds and every range a write of this process began (committed or
	// not), so a range outside them holds no row.
	claimed []Range
}

// recordedComment is the comment of a snapshot table every row of which
// was written with its writer record. EnsureTable puts it on a table it
// finds empty, so a table written before writers were recorded never
// carries it (and every write of it deletes its range's rows first).
const recordedComment = "tidemark: every row has its writer record in tidemark_meta.intervals"

// EnsureTable creates schema tidemark and m's snapshot table (empty, with
// the query's columns) if they do not exist. The creation runs m's SQL
// (LIMIT 0) as one statement in the sandbox, within m's timeout.
func (w *Warehouse) EnsureTable(ctx context.Context, m Model) error {
	w.mu.Lock()
	_, done := w.tables[m.Table]
	lock := w.creating[m.Table]
	if lock == nil {
		lock = &sync.Mutex{}
		w.creating[m.Table] = lock
	}
	w.mu.Unlock()
	if done {
		return nil
	}
	// One creation of a table at a time in this process: the second finds
	// the first's state.
	lock.Lock()
	defer lock.Unlock()
	w.mu.Lock()
	_, done = w.tables[m.Table]
	w.mu.Unlock()
	if done {
		return nil
	}
	if err := checkKind(m); err != nil {
		return err
	}
	if m.Kind == KindView || m.Kind == KindSeed {
		if err := w.ensureSchema(ctx); err != nil {
			return err
		}
		var err error
		if m.Kind == KindView {
			err = w.ensureView(ctx, m)
		} else {
			err = w.ensureSeedTable(ctx, m)
		}
		if err != nil {
			return fmt.Errorf("warehouse: create %s model %s: %w", m.Kind, m.Table, err)
		}
		w.mu.Lock()
		w.tables[m.Table] = &tableState{}
		w.mu.Unlock()
		return nil
	}
	start, end, args := w.b.ddlBounds()
	q, err := render(m, start, end)
	if err != nil {
		return err
	}
	if err := w.ensureSchema(ctx); err != nil {
		return err
	}
	// The condition names both bounds, whatever the SQL uses of them: a
	// bound parameter no expression uses fails (DuckDB). It is true (the
	// two bounds are alike: both values, or both NULL).
	create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s AS SELECT * FROM (%s) q WHERE (%s IS NULL) = (%s IS NULL) LIMIT 0", qualified(Schema, m.Table), q, start, end)
	var st tableState
	err = w.bounded(ctx, m, func(ctx context.Context, timeout time.Duration) error {
		return retry(ctx, func() error {
			return w.inTx(ctx, "BEGIN", func(c *sql.Conn) error {
				if err := w.b.sandbox(ctx, c, timeout); err != nil {
					return err
				}
				if _, err := w.b.execOne(ctx, c, create, args...); err != nil {
					return err
				}
				if err := w.b.unsandbox(ctx, c); err != nil {
					return err
				}
				if err := w.b.adoptTable(ctx, c, m.Table, m.TimeColumn); err != nil {
					return err
				}
				st.recorded, err = w.markRecorded(ctx, c, m.Table)
				return err
			})
		}, retryableDDL)
	})
	if err != nil {
		return fmt.Errorf("warehouse: create %s: %w", m.Table, err)
	}
	if st.recorded && w.b.soleWriter() {
		recs, err := w.Writers(ctx, m.Table)
		if err != nil {
			return fmt.Errorf("warehouse: create %s: %w", m.Table, err)
		}
		for _, r := range recs {
			st.claimed = addRange(st.claimed, r.Holds)
		}
	}
	w.mu.Lock()
	w.tables[m.Table] = &st
	w.mu.Unlock()
	return nil
}

// markRecorded reports, inside c's transaction, whether every row of the
// snapshot table was written with its writer record: the table carries
// recordedComment, or it is empty and gets it (a table with a comment of
// someone else's keeps it, and counts as not recorded).
func (w *Warehouse) markRecorded(ctx context.Context, c *sql.Conn, table string) (bool, error) {
	comment, err := w.b.tableComment(ctx, c, table)
	if err != nil || comment != "" {
		return comment == recordedComment, err
	}
	var n int64
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+qualified(Schema, table)+" LIMIT 1) q").Scan(&n); err != nil || n > 0 {
		return false, err
	}
	_, err = c.ExecContext(ctx, "COMMENT ON TABLE "+qualified(Schema, table)+" IS '"+recordedComment+"'")
	return err == nil, err
}

// What a range of a table may hold as a write of it begins (claim).
type holds int

const (
	// holdsRows: rows may be there; the write deletes them.
	holdsRows holds = iota
	// holdsIfRecorded: rows are there only if a writer record overlaps
	// the range, which the write's transaction looks up.
	holdsIfRecorded
	// holdsNothing: nothing was written there, and no record overlaps it.
	holdsNothing
)

// claim is what range r of table may hold as a write of it begins, and
// notes the write (claimed). The caller holds r (lockInterval).
func (w *Warehouse) claim(table string, r Range) holds {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.tables[table]
	switch {
	case st == nil || !st.recorded:
		return holdsRows
	case !w.b.soleWriter():
		return holdsIfRecorded
	}
	over := overlapsAny(st.claimed, r)
	st.claimed = addRange(st.claimed, r)
	if over {
		return holdsRows
	}
	return holdsNothing
}

// addRange is rs (sorted, disjoint) with r added: the ranges r overlaps or
// touches merge with it.
func addRange(rs []Range, r Range) []Range {
	i := sort.Search(len(rs), func(k int) bool { return !rs[k].End.Before(r.Start) })
	j := sort.Search(len(rs), func(k int) bool { return rs[k].Start.After(r.End) })
	if i < j {
		if rs[i].Start.Before(r.Start) {
			r.Start = rs[i].Start
		}
		if rs[j-1].End.After(r.End) {
			r.End = rs[j-1].End
		}
	}
	return slices.Replace(rs, i, j, r)
}

// overlapsAny reports whether r overlaps any of rs (sorted, disjoint).
func overlapsAny(rs []Range, r Range) bool {
	i := sort.Search(len(rs), func(k int) bool { return rs[k].End.After(r.Start) })
	return i < len(rs) && rs[i].Start.Before(r.End)
}

// ensureSchema creates schema Schema if it does not exist (once per
// Warehouse) and grants the sandbox what it needs of it.
func (w *Warehouse) ensureSchema(ctx context.Context) error {
	w.mu.Lock()
	done := w.schemaReady
	w.mu.Unlock()
	if done {
		return nil
	}
	err := retry(ctx, func() error {
		if _, err := w.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(Schema)); err != nil {
			return err
		}
		return w.b.schemaCreated(ctx, w.db)
	}, retryableDDL)
	if err != nil {
		return fmt.Errorf("warehouse: create schema %s: %w", Schema, err)
	}
	w.mu.Lock()
	w.schemaReady = true
	w.mu.Unlock()
	return nil
}

// timeoutOf is m's timeout.
func (w *Warehouse) timeoutOf(m Model) time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return w.modelTimeout
}

// bounded runs f with m's timeout; a computation that ran out of it fails
// with ErrTimeout (whatever the driver said).
func (w *Warehouse) bounded(ctx context.Context, m Model, f func(ctx context.Context, timeout time.Duration) error) error {
	timeout := w.timeoutOf(m)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f(tctx, timeout)
	if err != nil && ctx.Err() == nil && (tctx.Err() != nil || isStatementTimeout(err)) {
		return fmt.Errorf("%w (model %q, timeout %s): %w", ErrTimeout, m.Name, timeout, err)
	}
	return err
}

// BatchConcurrency is how many batches of one model are written at once
// when the model does not say: 1 on DuckDB, 4 on Postgres.
func (w *Warehouse) BatchConcurrency() int { return w.b.batchConcurrency() }

// WriteInterval recomputes m over [start, end) into its snapshot table,
// replacing the rows already there for that interval, in one transaction.
// The same transaction records m (m.Snapshot and its Fingerprint) as the
// writer of [start, end) of the table (Writers). m's SQL runs as one
// statement in the sandbox, within m's timeout. It returns the rows
// inserted. [start, end) is any range: one interval of m's unit or a batch
// of many (one DELETE and one INSERT … SELECT over the whole range). The
// DELETE is left out where nothing was written: in a table whose every
// row has its writer record, a range no record overlaps holds no row
// (claim; on Postgres the DELETE looks the records up under the range's
// lock, in the same transaction). Writes of disjoint ranges of one table
// may run at once, in this process and in others (Postgres); writes of
// overlapping ranges take turns.
func (w *Warehouse) WriteInterval(ctx context.Context, m Model, start, end time.Time) (int64, error) {
	start, end = start.UTC(), end.UTC()
	if !start.Before(end) {
		return 0, fmt.Errorf("warehouse: write %s: empty interval [%s, %s)", m.Table, start, end)
	}
	if m.Whole() {
		return w.writeWhole(ctx, m, start, end)
	}
	if m.Table == "" || m.TimeColumn == "" {
		return 0, fmt.Errorf("warehouse: write model %q: Table and TimeColumn are required", m.Name)
	}
	q, err := render(m, paramStart, paramEnd)
	if err != nil {
		return 0, fmt.Errorf("warehouse: %w", err)
	}
	if err := w.EnsureTable(ctx, m); err != nil {
		return 0, err
	}
	if err := w.ensureMeta(ctx); err != nil {
		return 0, err
	}
	r := Range{start, end}
	release, err := w.lockInterval(ctx, m.Table, r)
	if err != nil {
		return 0, err
	}
	defer release()

	// The bounds are typed as the macros type them (paramStart, paramEnd):
	// a bare $2 compared with the time column can bind as TIMESTAMP WITH
	// TIME ZONE on DuckDB, which then casts the column of every row (a
	// third of a batch's time in the backfill rows).
	table, tc := qualified(Schema, m.Table), quoteIdent(m.TimeColumn)
	inRange := fmt.Sprintf("%s >= %s AND %s < %s", tc, paramStart, tc, paramEnd)
	rw := rangeWrite{r: r,
		ins: fmt.Sprintf("INSERT INTO %s SELECT * FROM (%s) q WHERE q.%s >= %s AND q.%s < %s", table, q, tc, paramStart, tc, paramEnd)}
	switch w.claim(m.Table, r) {
	case holdsRows:
		rw.del = stmt{"DELETE FROM " + table + " WHERE " + inRange, []any{start, end}}
	case holdsIfRecorded:
		rw.del = stmt{fmt.Sprintf("DELETE FROM %s WHERE %s AND EXISTS (SELECT 1 FROM %s WHERE table_name = $3 AND holds_start < %s AND holds_end > %s)",
			table, inRange, qualified(MetaSchema, IntervalsTable), paramEnd, paramStart), []any{start, end, m.Table}}
	}
	fp := fingerprintOf(q)
	var rows int64
	err = w.bounded(ctx, m, func(ctx context.Context, timeout time.Duration) error {
		rw.timeout = timeout
		return retry(ctx, func() error {
			rw.rec = Written{Table: m.Table, Query: r, Holds: r, Snapshot: m.Snapshot, Fingerprint: fp, At: time.Now().UTC()}
			n, err := w.b.writeRange(ctx, w.db, rw)
			rows = n
			return err
		}, retryableWrite)
	})
	if err != nil {
		return 0, fmt.Errorf("warehouse: write %s [%s, %s): %w", m.Table, start.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	return rows, nil
}

// stmt is a statement and its arguments.
type stmt struct {
	sql  string
	args []any
}

// rangeWrite is one write of a range of a snapshot table (WriteInterval),
// which a backend runs as one transaction (writeRange).
type rangeWrite struct {
	r       Range
	timeout time.Duration // each statement's in the sandbox
	// del deletes the rows already in r; its sql is "" when r holds none
	// and no writer record overlaps r (holdsNothing).
	del stmt
	// ins is the model's INSERT … SELECT over r (its bounds $1 and $2),
	// one statement built from model SQL: run it in the sandbox.
	ins string
	// rec is the write's record; Rows is the INSERT's.
	rec Written
}

// lockInterval waits until no other write of this process covers part of
// r in table, then holds r until release is called.
func (w *Warehouse) lockInterval(ctx context.Context, table string, r Range) (release func(), err error) {
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for slices.ContainsFunc(w.writing[table], func(o Range) bool {
		return o.Start.Before(r.End) && r.Start.Before(o.End)
	}) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w.cond.Wait()
	}
	w.writing[table] = append(w.writing[table], r)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		rs := w.writing[table]
		i := slices.Index(rs, r)
		w.writing[table] = slices.Delete(rs, i, i+1)
		if len(w.writing[table]) == 0 {
			delete(w.writing, table)
		}
		w.cond.Broadcast()
	}, nil
}

// retryableWrite reports a conflict that a retry of the whole transaction
// resolves.
func retryableWrite(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40001" || pg.Code == "40P01"
	}
	s := err.Error()
	return strings.Contains(s, "Conflict on tuple deletion") ||
		strings.Contains(s, "write-write conflict") ||
		strings.Contains(s, "Conflict on update")
}

// retryableDDL adds the races of concurrent IF NOT EXISTS creation.
func retryableDDL(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && (pg.Code == "23505" || pg.Code == "42P07" || pg.Code == "42P06" || pg.Code == "42710") {
		return true
	}
	// Concurrent GRANTs on one object (the sandbox's, as two processes
	// create the schema) race on its catalog row.
	if errors.As(err, &pg) && pg.Code == "XX000" && strings.Contains(pg.Message, "tuple concurrently updated") {
		return true
	}
	return retryableWrite(err)
}

// retryablePromote adds a lock wait given up (lock_timeout).
func retryablePromote(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "55P03" {
		return true
	}
	return retryableDDL(err)
}

func retry(ctx context.Context, f func() error, retryable func(error) bool) error {
	var err error
	for attempt := range writeAttempts {
		if err = f(); err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	return fmt.Errorf("%d attempts: %w", writeAttempts, err)
}

// maxIdent is the longest identifier Postgres keeps whole
// (models.MaxIdentBytes; a plan refuses a longer view schema first).
const maxIdent = 63

// testHookPromote, when set, runs inside a promotion's transaction after
// each view swap; an error fails the promotion (a failpoint for tests).
var testHookPromote func(model string) error

// Promote points env's view of every model in views (model name →
// snapshot table) at that table, all in one transaction; the view's
// schema (ViewOf: env, or <schema>__<env> for a schema-qualified model
// "<schema>.<model>") is created if needed. Promotions to one environment
// are serialized.
func (w *Warehouse) Promote(ctx context.Context, env string, views map[string]string) error {
	if env == "" || env == Schema {
		return fmt.Errorf("warehouse: promote: invalid environment %q", env)
	}
	w.mu.Lock()
	lock := w.envs[env]
	if lock == nil {
		lock = &sync.Mutex{}
		w.envs[env] = lock
	}
	w.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()

	models := make([]string, 0, len(views))
	for m := range views {
		models = append(models, m)
	}
	slices.Sort(models)
	err := retry(ctx, func() error {
		tx, err := w.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := w.b.beginPromote(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(env)); err != nil {
			return err
		}
		created := map[string]bool{env: true}
		for _, m := range models {
			schema, view := ViewOf(env, m)
			if schema == Schema || schema == MetaSchema || len(schema) > maxIdent {
				return fmt.Errorf("model %q: its view's schema %q is not one an environment may use (tidemark's own, or more than %d bytes)", m, schema, maxIdent)
			}
			if !created[schema] {
				if _, err := tx.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(schema)); err != nil {
					return err
				}
				created[schema] = true
			}
			var n int
			err := tx.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2", Schema, views[m]).Scan(&n)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("model %q: snapshot table %s.%s does not exist", m, Schema, views[m])
			}
			sel := "SELECT * FROM " + qualified(Schema, views[m])
			if err := w.b.swapView(ctx, tx, schema, view, sel); err != nil {
				return fmt.Errorf("model %q: %w", m, err)
			}
			if testHookPromote != nil {
				if err := testHookPromote(m); err != nil {
					return err
				}
			}
		}
		return tx.Commit()
	}, retryablePromote)
	if err != nil {
		return fmt.Errorf("warehouse: promote %s: %w", env, err)
	}
	return nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Query runs one read-only statement within the warehouse's query limits
// (Options.QueryLimits): QueryLimited, for callers that want every row:
// an answer the limits cut fails with ErrTruncated.
func (w *Warehouse) Query(ctx context.Context, q string) (cols []string, rows [][]any, err error) {
	res, err := w.QueryLimited(ctx, q, w.limits)
	if err != nil {
		return nil, nil, err
	}
	if res.Truncated {
		return nil, nil, fmt.Errorf("%w: more than %d rows or %d bytes", ErrTruncated, w.limits.Rows, w.limits.Bytes)
	}
	return res.Columns, res.Rows, nil
}

// Stats is the size and freshness of one table.
type Stats struct {
	Rows    int64
	MaxTime time.Time // zero when the table is empty
}

// Stats counts the rows of the snapshot table and finds its latest time
// (none without a timeColumn: a model computed whole).
func (w *Warehouse) Stats(ctx context.Context, table, timeColumn string) (Stats, error) {
	var st Stats
	var max sql.NullTime
	latest := "CAST(NULL AS TIMESTAMP)"
	if timeColumn != "" {
		latest = "max(" + quoteIdent(timeColumn) + ")"
	}
	q := fmt.Sprintf("SELECT count(*), %s FROM %s", latest, qualified(Schema, table))
	if err := w.db.QueryRowContext(ctx, q).Scan(&st.Rows, &max); err != nil {
		return Stats{}, fmt.Errorf("warehouse: stats %s: %w", table, err)
	}
	if max.Valid {
		st.MaxTime = max.Time.UTC()
	}
	return st, nil
}

// ViewsReading lists the views (schema.view) that read the snapshot table.
func (w *Warehouse) ViewsReading(ctx context.Context, table string) ([]string, error) {
	return w.b.viewsReading(ctx, w.db, table)
}

// DropTable drops the snapshot table, refusing with ErrInUse when any view
// reads it.
func (w *Warehouse) DropTable(ctx context.Context, table string) error {
	views, err := w.ViewsReading(ctx, table)
	if err != nil {
		return fmt.Errorf("warehouse: drop %s: %w", table, err)
	}
	if len(views) > 0 {
		return fmt.Errorf("%w: %s is read by %s", ErrInUse, table, strings.Join(views, ", "))
	}
	drop := "DROP TABLE IF EXISTS "
	if view, err := w.isView(ctx, table); err != nil {
		return fmt.Errorf("warehouse: drop %s: %w", table, err)
	} else if view {
		drop = "DROP VIEW IF EXISTS " // a view model's
	}
	if _, err := w.db.ExecContext(ctx, drop+qualified(Schema, table)); err != nil {
		return fmt.Errorf("warehouse: drop %s: %w", table, err)
	}
	if err := w.forgetTable(ctx, table); err != nil {
		return fmt.Errorf("warehouse: drop %s: forgetting its writers: %w", table, err)
	}
	w.mu.Lock()
	delete(w.tables, table)
	w.mu.Unlock()
	return nil
}

// IsPostgresDSN reports whether Open takes dsn as a Postgres database
// (a postgres:// or postgresql:// URL); anything else is a DuckDB file.
func IsPostgresDSN(dsn string) bool { return isPostgresDSN(dsn) }

// Redact is dsn fit for a log line: a Postgres URL's password replaced.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
