// Package warehouse is tidemark's data plane: it writes the intervals of a
// model's snapshot tables, swaps the views of an environment onto snapshot
// tables (promotion), recomputes a model to verify what an environment
// shows, and answers read-only queries. It speaks to an embedded DuckDB file
// (built with cgo) or to Postgres (a postgres:// DSN) through database/sql and
// one small interface with one implementation per engine (backend:
// duckdb.go, postgres.go), chosen by Open from the DSN in one place.
//
// Layout in the warehouse: snapshot tables live in the schema "tidemark"
// (one table per model fingerprint, for example tidemark."hourly__3f2a9c");
// every environment is a schema of views, one per model, each a plain
// SELECT * FROM one snapshot table (SQLMesh's virtual layer).
//
// Invariants:
//   - Writes are interval-idempotent. WriteInterval replaces exactly the rows
//     of [start, end) of one snapshot table: DELETE of the slice and INSERT of
//     the recomputed slice run in one transaction, and the model's rows are
//     filtered again on the time column outside the model query, so a query
//     that leaks rows outside its interval cannot break a rerun. Writing
//     intervals out of order, or twice, leaves the rows a single full write
//     would. Write conflicts (DuckDB's "Conflict on tuple deletion", Postgres
//     serialization failures) are retried a bounded number of times. The
//     DELETE is left out where it cannot find a row: in a table every row
//     of which was written with its writer record (EnsureTable marks a
//     table it finds empty with a comment, recordedComment), a range that
//     no record overlaps holds no row. DuckDB's owner knows its records
//     (loaded once per table, then its own writes); on Postgres the DELETE
//     looks the records up itself, in the write's transaction and under
//     its range lock. A table without the mark (written before writers
//     were recorded) has every range deleted before it is written.
//     In-process, writes of overlapping intervals of one table wait for
//     each other; on Postgres, writers of one table also take turns across
//     processes (a transaction-scoped advisory lock), since read committed
//     would let two DELETE+INSERT of one slice interleave into duplicates.
//   - Every write records its writer. A forward-only version writes its
//     incumbent's table and keeps the rows its predecessor wrote, so one
//     table holds the rows of several queries. WriteInterval records, in
//     the same transaction as the DELETE+INSERT, which snapshot (Model.
//     Snapshot) and which query (Fingerprint: a digest of the rendered
//     query, upstream tables included) wrote [start, end), in
//     tidemark_meta.intervals (MetaSchema; schema tidemark holds snapshot
//     tables only), replacing the records of the slice it rewrote (an
//     earlier write that overlaps keeps its parts outside it: Written.
//     Holds). The record is exactly as true as the rows: both commit or
//     neither does. It lives here rather than being derived from the
//     event log because the log records a completion after the rows
//     commit (a crash in between leaves rows no event names, and a rerun
//     by another version rewrites rows before its completion), and only
//     the warehouse knows what a slice of a table holds. Verify of a
//     table (VerifyChecks) then recomputes each part with its writer's
//     query over that writer's bounds (Writers; sqlrun.VerifyEnv resolves
//     the snapshot in the log and uses a record only when the fingerprint
//     matches). DropTable deletes the table's records.
//   - One transaction per interval, and one per promotion: every view of a
//     promotion is swapped in the same transaction, so a reader sees the old
//     views or the new ones, never a mix, and a failed promotion changes
//     nothing. Promotions to one environment are serialized in-process. On
//     Postgres a promotion waits at most 200 ms for each view's lock and
//     otherwise starts over, so a reader of several views never deadlocks
//     with it.
//   - No value is ever spliced into SQL text: the interval bounds, written
//     @start_ts and @end_ts in model SQL (SQLMesh's macro names), are bound
//     as positional parameters holding UTC TIMESTAMPs; any other @name is
//     refused. A model in SQLMesh's vocabulary (Model.Macros) has each of
//     SQLMesh's macros rendered as an expression of those two parameters
//     (SQLMeshMacro). Identifiers (schemas, tables, columns) are quoted.
//     The one
//     statement that cannot take a parameter, a view model's CREATE VIEW
//     (a view holds none), has its bounds written as TIMESTAMP constants
//     that tidemark formats from the computation's own times (tsLiteral),
//     never from client text.
//   - Kinds computed whole (Model.Kind: KindFull, KindView, KindSeed; no
//     time column) are written by WriteInterval as one computation of
//     [start, end) in one transaction that replaces the object whole and
//     its one writer record: full deletes every row and inserts the
//     query's; view is CREATE OR REPLACE VIEW tidemark.<table> over the
//     query (owned by the sandbox on Postgres, so it reads with the
//     sandbox's privileges), no row written; seed loads the table from
//     Model.Seed, read by DuckDB's CSV reader (RFC 4180, types detected)
//     in a fresh in-memory DuckDB whose only allowed path is a private
//     temporary file holding the content (external access then off, the
//     configuration locked), its values inserted as parameters. A
//     computation whose end is before the one this snapshot recorded
//     (a seed: whose content this snapshot loaded) writes nothing and
//     succeeds; one as of the same end recomputes (a restatement's or a
//     catch-up's recompute: the upstream's rows changed). Audits, Verify and DiffTables read such an object whole.
//   - A snapshot reads the upstream snapshot tables it was built against,
//     never an environment's views: each upstream model name is bound by a
//     CTE prefix (WITH orders AS (SELECT * FROM tidemark."orders__x") ...).
//   - Model SQL and queries run with the least privilege, as exactly one
//     statement. Every statement built from model SQL (a table's creation,
//     an interval's INSERT, a verification) and every Query runs through
//     backend.execOne/queryOne, or backend.writeRange for an interval's
//     INSERT: a DuckDB prepared statement made by the driver's Prepare
//     (which refuses a text of several statements before running any) or
//     the Postgres extended protocol (which refuses several), so model SQL
//     cannot append statements of its own. On Postgres they run as
//     SandboxRole (SET LOCAL ROLE, with statement_timeout; Open creates or
//     checks the role and closes the set_config way back); an interval's
//     write sends its statements in two batches of the extended protocol
//     (one round trip each), the model's INSERT between the SET LOCALs and
//     RESET ROLE; DuckDB opens with external access off and its
//     configuration locked for the whole database (these settings are per
//     instance, not per connection), with bounded threads, memory and
//     temporary files.
//   - Every computation is bounded: a model's (Model.Timeout, else
//     Options.ModelTimeout) is cancelled through the driver's context and
//     fails with ErrTimeout; a query reads its rows as they come and stops
//     at its Limits (rows, JSON bytes), saying Truncated.
//   - Audits only read. Audit runs each audit of a written range (a
//     built-in rendered from its kind, or a custom audit's SQL with
//     @this_model bound to a CTE of the table's rows in the range) as one
//     statement in a read-only transaction, in the sandbox, within the
//     model's timeout, its values bound as parameters; an audit that
//     cannot run is a failed result saying why, never an error.
//   - One process owns a DuckDB file. A second opener (another process, or a
//     second Open in this process) gets ErrLocked naming the file.
//   - DropTable refuses a snapshot table that any view reads (DuckDB would
//     let the drop succeed and break the view), a view model's view
//     included; it drops a view model's object as a view.
//
// A build without cgo has no DuckDB: Open of a DuckDB path returns
// ErrNoCgo, and Postgres works as usual.
//
// Importers: server (serve), cmd/tidemark (demo, worker, scenario), scenario
// (Options.Warehouse), work/sqlrun (the runner, the views, verify),
// sqlcheck, bench.
package warehouse
