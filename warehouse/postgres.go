package warehouse

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgBackend is a Postgres database, shared by any number of processes.
type pgBackend struct{}

// SandboxRole is the Postgres role model SQL and queries run as (SET
// LOCAL ROLE, inside each of their transactions): no login, no superuser,
// none of pg_read_server_files, pg_write_server_files,
// pg_execute_server_program (so no server file is read or written and no
// COPY … PROGRAM runs), no CREATE on the database, and not
// pg_read_all_data (it reads pg_authid's password hashes). It reads only
// what it is granted: the snapshot tables (adoptTable), the environments'
// views (swapView), and whatever source schemas an operator grants; it
// creates snapshot tables in schema tidemark (which tidemark then owns)
// and INSERTs into them.
//
// Open creates it when it is missing and the connecting user may (a
// superuser, or CREATEROLE), and checks it otherwise: see README's
// "Postgres warehouse" for the statements an administrator runs. A SET
// ROLE can be undone by the statement itself (set_config('role', …)) back
// to the connecting user: Open revokes set_config from PUBLIC when it
// connects as a superuser, and otherwise refuses a connecting user that
// holds what the sandbox must not (ErrSandbox).
const SandboxRole = "tidemark_sandbox"

// ErrSandbox is returned by Open of a Postgres warehouse whose sandbox
// role (SandboxRole) is missing and cannot be created, holds privileges it
// must not, or can be left; the message says what to grant or revoke.
var ErrSandbox = errors.New("warehouse: the Postgres sandbox role cannot be set up")

// setupSandbox creates or checks SandboxRole (see there).
func setupSandbox(ctx context.Context, db *sql.DB) error {
	q := func(dst any, query string) error { return db.QueryRowContext(ctx, query).Scan(dst) }
	var super bool
	if err := q(&super, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"); err != nil {
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	var exists bool
	if err := q(&exists, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = '"+SandboxRole+"')"); err != nil {
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	if !exists {
		err := retry(ctx, func() error {
			_, err := db.ExecContext(ctx, "CREATE ROLE "+SandboxRole+" NOLOGIN")
			var pg *pgconn.PgError
			if errors.As(err, &pg) && pg.Code == "42710" { // created meanwhile
				return nil
			}
			return err
		}, retryableDDL)
		if err != nil {
			return fmt.Errorf("%w: %s does not exist and cannot be created (%w): have an administrator run CREATE ROLE %s NOLOGIN; GRANT %s TO <tidemark's user> (README, \"Postgres warehouse\")",
				ErrSandbox, SandboxRole, err, SandboxRole, SandboxRole)
		}
	}
	var bad bool
	if err := q(&bad, `SELECT rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb
		OR pg_has_role(oid, 'pg_read_server_files', 'USAGE') OR pg_has_role(oid, 'pg_write_server_files', 'USAGE')
		OR pg_has_role(oid, 'pg_execute_server_program', 'USAGE')
		OR pg_has_role(oid, 'pg_read_all_data', 'USAGE') OR pg_has_role(oid, 'pg_write_all_data', 'USAGE')
		FROM pg_roles WHERE rolname = '`+SandboxRole+`'`); err != nil {
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	if bad {
		return fmt.Errorf("%w: %s is a superuser, may create roles or databases, bypasses row security, or has pg_read_server_files, pg_write_server_files, pg_execute_server_program, pg_read_all_data (which reads pg_authid's password hashes too) or pg_write_all_data: revoke them, and grant SELECT on the source schemas a model must read instead", ErrSandbox, SandboxRole)
	}
	var member bool
	if err := q(&member, "SELECT pg_has_role(current_user, '"+SandboxRole+"', 'MEMBER')"); err != nil {
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	if !member {
		if _, err := db.ExecContext(ctx, "GRANT "+SandboxRole+" TO CURRENT_USER"); err != nil {
			return fmt.Errorf("%w: tidemark's user cannot SET ROLE %s (%w): GRANT %s TO <tidemark's user>", ErrSandbox, SandboxRole, err, SandboxRole)
		}
	}
	// set_config('role', …) inside a statement undoes SET ROLE (the
	// connecting user may set any role it is a member of).
	var canSet bool
	if err := q(&canSet, "SELECT has_function_privilege('"+SandboxRole+"', 'pg_catalog.set_config(text,text,boolean)', 'EXECUTE')"); err != nil {
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	if !canSet {
		return nil
	}
	if super {
		if _, err := db.ExecContext(ctx, "REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text,text,boolean) FROM PUBLIC"); err != nil {
			return fmt.Errorf("%w: REVOKE EXECUTE ON FUNCTION set_config FROM PUBLIC: %w", ErrSandbox, err)
		}
		return nil
	}
	var strong bool
	if err := q(&strong, `SELECT pg_has_role(current_user, 'pg_read_server_files', 'USAGE') OR pg_has_role(current_user, 'pg_write_server_files', 'USAGE')
		OR pg_has_role(current_user, 'pg_execute_server_program', 'USAGE')`); err != nil {
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	if strong {
		return fmt.Errorf("%w: model SQL could leave %s for tidemark's user (set_config('role', …)), which may read or write the server's files or run programs: connect as a user without pg_read_server_files, pg_write_server_files and pg_execute_server_program, or have a superuser REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text,text,boolean) FROM PUBLIC", ErrSandbox, SandboxRole)
	}
	return nil
}

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
	if err := setupSandbox(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (pgBackend) engine() string { return "postgres" }

func (pgBackend) hourBucket(col string) string {
	return "CAST(floor(extract(epoch FROM " + col + ") / 3600) AS BIGINT)"
}

// rowHash: the record hash hash partitioning uses (PostgreSQL 14 and
// later; a bigint).
func (pgBackend) rowHash(cols []string) string {
	return "hash_record_extended(ROW(" + strings.Join(cols, ", ") + "), 0)"
}

// batchConcurrency: a Postgres statement runs on one core (no parallel
// plan for INSERT … SELECT), so batches of disjoint ranges run four at a
// time (the range locks of writeRange let them).
func (pgBackend) batchConcurrency() int { return 4 }

// ddlBounds: DDL takes no parameters; the table is created from LIMIT 0,
// so the bounds' values do not matter.
func (pgBackend) ddlBounds() (string, string, []any) { return nullTS, nullTS, nil }

// soleWriter: any number of processes write one Postgres database.
func (pgBackend) soleWriter() bool { return false }

// The range's turn (writeRange): read committed lets two processes'
// DELETE+INSERT of one slice interleave into duplicates: writers of
// overlapping slices of one table take turns across processes, with
// transaction-scoped advisory locks at several granularities (so that
// writers of disjoint batches of one table run at once): the table, then
// grids of lockGrains (UTC hours, days, 32 and 1,024 days). A range takes
// exclusively the cells of the finest grid where it touches at most
// lockMax of them, and shared the cells of every coarser grid and the
// table; a range too long for every grid takes the table exclusively. Two
// overlapping ranges share a key one of them holds exclusively; disjoint
// ones share none, unless both touch one cell of their grid (a batch not
// aligned to it). Every writer takes its keys in one order (table, then
// grids coarse to fine, cells by time), so no two wait for each other.
const lockRangeSQL = `SELECT count(CASE WHEN t.s THEN pg_advisory_xact_lock_shared(hashtextextended(t.k, 0))::text
  ELSE pg_advisory_xact_lock(hashtextextended(t.k, 0))::text END) FROM unnest($1::text[], $2::bool[]) AS t(k, s)`

// Lock grids of the range locks (lockRangeSQL), fine to coarse, and the
// most cells one range locks exclusively.
var lockGrains = []time.Duration{time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 1024 * 24 * time.Hour}

const lockMax = 192

// rangeLocks is the advisory lock keys of a write of r into table, in the
// order they are taken, and whether each is shared.
func rangeLocks(table string, r Range) (keys []string, shared []bool) {
	base := "tidemark.write:" + table // the table's key (a whole-table lock before ranges had their own)
	cells := func(g time.Duration) (int64, int64) {
		sec := int64(g / time.Second)
		return floorDiv(r.Start.Unix(), sec), floorDiv(r.End.Add(-time.Nanosecond).Unix(), sec)
	}
	fine := -1 // the grid locked exclusively
	for i, g := range lockGrains {
		if a, b := cells(g); b-a+1 <= lockMax {
			fine = i
			break
		}
	}
	if fine < 0 {
		return []string{base}, []bool{false}
	}
	keys, shared = append(keys, base), append(shared, true)
	for i := len(lockGrains) - 1; i >= fine; i-- {
		a, b := cells(lockGrains[i])
		for c := a; c <= b; c++ {
			keys, shared = append(keys, fmt.Sprintf("%s:%d:%d", base, i, c)), append(shared, i != fine)
		}
	}
	return keys, shared
}

// floorDiv is a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// The records' turn (writeRange): their own lock, apart from the ranges'
// keys, taken last by every writer (see lockRangeSQL's order); its key is
// writersLock(table).
const lockWritersSQL = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

func writersLock(table string) string { return "tidemark.writers:" + table }

// writeRange sends the write's statements in two batches of the extended
// protocol, one round trip each: BEGIN, the range's locks, rw.del, the
// sandbox (sandboxSQL), rw.ins, RESET ROLE, the records' lock and the
// DELETE … RETURNING of the records rw.rec overlaps; then the INSERT of
// the records that replace them (replacing) and COMMIT. The server runs a
// batch's statements in order and skips the rest of it after an error
// (the transaction is then rolled back), so each statement runs exactly
// as it would on its own: the model's INSERT … SELECT is still one Parse
// (one statement) run as SandboxRole within statement_timeout.
func (pgBackend) writeRange(ctx context.Context, db *sql.DB, rw rangeWrite) (int64, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var rows int64
	var bad bool
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("warehouse: Postgres connection %T", dc)
		}
		conn := sc.Conn()
		var err error
		rows, err = pgWriteRange(ctx, conn, rw)
		if err != nil && !conn.PgConn().IsClosed() && conn.PgConn().TxStatus() != 'I' {
			if rerr := conn.PgConn().Exec(context.WithoutCancel(ctx), "ROLLBACK").Close(); rerr != nil {
				bad = true
			}
		}
		return err
	})
	if bad {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	return rows, err
}

// pgWriteRange runs writeRange's statements on conn and returns the rows
// the INSERT inserted.
func pgWriteRange(ctx context.Context, conn *pgx.Conn, rw rangeWrite) (int64, error) {
	keys, shared := rangeLocks(rw.rec.Table, rw.r)
	var b pgBatch
	b.add("BEGIN")
	b.add(lockRangeSQL, keys, shared)
	if rw.del.sql != "" {
		b.add(rw.del.sql, rw.del.args...)
	}
	for _, q := range sandboxSQL(rw.timeout) {
		b.add(q)
	}
	ins := b.add(rw.ins, rw.r.Start, rw.r.End)
	b.add(unsandboxSQL)
	b.add(lockWritersSQL, writersLock(rw.rec.Table))
	del := b.add(deleteRecords, rw.rec.Table, rw.rec.Holds.Start, rw.rec.Holds.End)
	res, err := b.run(ctx, conn)
	if err != nil {
		return 0, err
	}
	rec := rw.rec
	rec.Rows = res[ins].CommandTag.RowsAffected()
	old, err := decodeWritten(conn.TypeMap(), res[del])
	if err != nil {
		return 0, err
	}
	var commit pgBatch
	q, args := insertRecords(replacing(rec, old))
	commit.add(q, args...)
	commit.add("COMMIT")
	if _, err := commit.run(ctx, conn); err != nil {
		return 0, err
	}
	return rec.Rows, nil
}

// pgBatch is statements sent at once, each with the extended protocol (an
// unnamed statement: Parse, which takes exactly one statement, Bind,
// Describe, Execute), then one Sync.
type pgBatch struct {
	sql  []string
	args [][]any
}

// add queues q with args and returns its index in run's results.
func (b *pgBatch) add(q string, args ...any) int {
	b.sql, b.args = append(b.sql, q), append(b.args, args)
	return len(b.sql) - 1
}

// run sends the batch in one round trip and reads every result; the first
// error stops it (the server skips the statements after it).
func (b *pgBatch) run(ctx context.Context, conn *pgx.Conn) ([]*pgconn.Result, error) {
	var batch pgconn.Batch
	for i, q := range b.sql {
		// Text parameters whose types the server infers from the
		// statement, as pgx's QueryExecModeExec sends them.
		var eqb pgx.ExtendedQueryBuilder
		if err := eqb.Build(conn.TypeMap(), nil, b.args[i]); err != nil {
			return nil, err
		}
		batch.ExecParams(q, eqb.ParamValues, nil, eqb.ParamFormats, eqb.ResultFormats)
	}
	res, err := conn.PgConn().ExecBatch(ctx, &batch).ReadAll()
	if err == nil && len(res) != len(b.sql) {
		err = fmt.Errorf("warehouse: %d results of %d statements", len(res), len(b.sql))
	}
	return res, err
}

// decodeWritten reads the records of a DELETE … RETURNING writtenColumns.
func decodeWritten(m *pgtype.Map, res *pgconn.Result) ([]Written, error) {
	var out []Written
	for _, row := range res.Rows {
		var x Written
		dst := x.fields()
		if len(row) != len(dst) || len(res.FieldDescriptions) != len(dst) {
			return nil, fmt.Errorf("warehouse: a writer record of %d columns", len(row))
		}
		for i, v := range row {
			fd := res.FieldDescriptions[i]
			if err := m.Scan(fd.DataTypeOID, fd.Format, v, dst[i]); err != nil {
				return nil, fmt.Errorf("warehouse: writer record column %s: %w", fd.Name, err)
			}
		}
		out = append(out, x.utc())
	}
	return out, nil
}

// lockWhole: an advisory lock of the object's name, held to the
// transaction's end: a second computation of it, in any process, waits
// for the first's transaction, then finds its record; readers do not
// wait. (LOCK TABLE of a view would lock the tables it reads too, with
// the privileges of its owner, the sandbox.)
func (pgBackend) lockWhole(ctx context.Context, c *sql.Conn, table string) error {
	_, err := c.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "tidemark.whole:"+table)
	return err
}

func (pgBackend) tableComment(ctx context.Context, db querier, table string) (string, error) {
	return queryComment(ctx, db, "SELECT obj_description(to_regclass($1), 'pg_class')", qualified(Schema, table))
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
// change: DROP and CREATE in the same transaction. The sandbox reads
// nothing it is not granted: the environment's schema and view are.
func (pgBackend) swapView(ctx context.Context, x execer, schema, name, sel string) error {
	view := qualified(schema, name)
	for _, stmt := range []string{
		"DROP VIEW IF EXISTS " + view,
		"CREATE VIEW " + view + " AS " + sel,
		"GRANT USAGE ON SCHEMA " + quoteIdent(schema) + " TO " + SandboxRole,
		"GRANT SELECT ON " + view + " TO " + SandboxRole,
	} {
		if _, err := x.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
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

// sandboxSQL is the statements that make the statements after them in a
// transaction run as SandboxRole within timeout each.
func sandboxSQL(timeout time.Duration) []string {
	ms := timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return []string{"SET LOCAL statement_timeout = " + strconv.FormatInt(ms, 10), "SET LOCAL ROLE " + SandboxRole}
}

// unsandboxSQL ends sandboxSQL's role (the timeout stays until the
// transaction ends).
const unsandboxSQL = "RESET ROLE"

// sandbox sends sandboxSQL in one round trip: a text without arguments
// goes as one simple query, which runs its statements in order and stops
// at the first that fails.
func (pgBackend) sandbox(ctx context.Context, c *sql.Conn, timeout time.Duration) error {
	_, err := c.ExecContext(ctx, strings.Join(sandboxSQL(timeout), "; "))
	return err
}

func (pgBackend) unsandbox(ctx context.Context, c *sql.Conn) error {
	_, err := c.ExecContext(ctx, unsandboxSQL)
	return err
}

// adoptTable: the sandbox created the table; tidemark owns it (its drops
// and views), and the sandbox may insert into it and read it (a model
// downstream reads it through its CTE). The time column is indexed: a
// write's DELETE of its range (and verify's reads of one) would otherwise
// scan the whole table, which made a backfill quadratic in the table's
// size. The index is unnamed (Postgres names it uniquely: a name built
// from a 63-byte table name would be cut), made once under a lock, since
// several processes may adopt one table. A table adopted already (by
// another process: each adopts a table at its first write of it) is not
// altered again: ALTER TABLE takes an ACCESS EXCLUSIVE lock even when the
// owner does not change, so a worker's first batch of a table would wait
// for every other worker's batch of it in flight, and every reader of the
// table (a view) would queue behind it.
func (pgBackend) adoptTable(ctx context.Context, c *sql.Conn, table, timeColumn string) error {
	t := qualified(Schema, table)
	var adopted bool
	if err := c.QueryRowContext(ctx, `SELECT c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
		AND has_table_privilege('`+SandboxRole+`', c.oid, 'SELECT') AND has_table_privilege('`+SandboxRole+`', c.oid, 'INSERT')
		FROM pg_class c WHERE c.oid = to_regclass($1)`, t).Scan(&adopted); err != nil {
		return err
	}
	if !adopted {
		if _, err := c.ExecContext(ctx, "ALTER TABLE "+t+" OWNER TO CURRENT_USER"); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, "GRANT SELECT, INSERT ON "+t+" TO "+SandboxRole); err != nil {
			return err
		}
	}
	if timeColumn == "" {
		return nil
	}
	if _, err := c.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "tidemark.index:"+table); err != nil {
		return err
	}
	var indexed bool
	if err := c.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		WHERE i.indrelid = to_regclass($1) AND a.attname = $2)`, t, timeColumn).Scan(&indexed); err != nil {
		return err
	}
	if indexed {
		return nil
	}
	_, err := c.ExecContext(ctx, "CREATE INDEX ON "+t+" ("+quoteIdent(timeColumn)+")")
	return err
}

// schemaCreated: the sandbox creates snapshot tables in it.
func (pgBackend) schemaCreated(ctx context.Context, x execer) error {
	_, err := x.ExecContext(ctx, "GRANT USAGE, CREATE ON SCHEMA "+quoteIdent(Schema)+" TO "+SandboxRole)
	return err
}

// oneStatement is the extended protocol without a cached statement: the
// server refuses a text of several statements (pgx would use the simple
// protocol, which runs them all, for a statement without arguments).
var oneStatement any = pgx.QueryExecModeDescribeExec

func (pgBackend) execOne(ctx context.Context, c *sql.Conn, q string, args ...any) (int64, error) {
	if len(args) > 0 {
		res, err := c.ExecContext(ctx, q, append([]any{oneStatement}, args...)...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	rows, err := c.QueryContext(ctx, q, oneStatement)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
	}
	return 0, errors.Join(rows.Err(), rows.Close())
}

func (pgBackend) queryOne(ctx context.Context, c *sql.Conn, q string, args []any, each func([]string, []any) (bool, error)) error {
	// Stopping early cancels the statement (the connection is dropped)
	// rather than reading the rows left.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := c.QueryContext(qctx, q, append([]any{oneStatement}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if more, err := each(cols, row); err != nil || !more {
			cancel()
			return err
		}
	}
	return rows.Err()
}

func (pgBackend) limitRows(_ context.Context, _ *sql.Conn, q string, _ int) (string, error) {
	return q, nil
}
