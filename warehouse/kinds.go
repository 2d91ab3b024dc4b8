package warehouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The kinds of a model (Model.Kind). The warehouse's own names: they are
// events.Kind's values for the kinds computed whole.
const (
	// KindInterval ("") is a model computed interval by interval into
	// its table (incremental, forward_only): WriteInterval replaces the
	// rows of a range, placed by Model.TimeColumn.
	KindInterval = ""
	// KindFull is a table recomputed whole at each computation: its rows
	// are replaced in one transaction.
	KindFull = "full"
	// KindView is a view (the snapshot's object in schema Schema) over the
	// rendered query: its computation (re)creates it; no rows are written.
	KindView = "view"
	// KindSeed is a table loaded from Model.Seed, CSV content, read by
	// DuckDB's CSV reader in a sandbox that reads only that content.
	KindSeed = "seed"
)

// ErrKind is returned for a model whose Kind the warehouse does not know,
// or which the warehouse's engine cannot compute; the message names the
// kind and the engine.
var ErrKind = errors.New("warehouse: kind not supported")

// Whole reports whether m is computed whole (full, view, seed): it has no
// time column, and a computation of [start, end) recomputes all of it.
func (m Model) Whole() bool { return m.Kind != KindInterval }

// checkKind refuses a kind the warehouse does not know.
func checkKind(m Model) error {
	switch m.Kind {
	case KindInterval, KindFull, KindView, KindSeed:
		return nil
	}
	return fmt.Errorf("%w: model %q has kind %q (want %q, %q, %q or none)", ErrKind, m.Name, m.Kind, KindFull, KindView, KindSeed)
}

// boundsUsed is a condition that is true for every computation (start <
// end) and names both bound parameters: a statement whose query has no
// macro still uses the two parameters it is given (Postgres refuses a
// parameter whose type nothing in the statement fixes).
const boundsUsed = paramStart + " < " + paramEnd

// everything is the range a whole write holds against the writes of its
// table in this process (lockInterval): all of it.
var everything = Range{Start: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}

// tsLiteral is t as a TIMESTAMP constant, for the one statement that
// takes no parameter and needs the bounds: a view's creation (a view
// holds no parameter). t is the computation's bound, never client text.
func tsLiteral(t time.Time) string {
	return "CAST('" + t.UTC().Format("2006-01-02 15:04:05.999999") + "' AS TIMESTAMP)"
}

// writeWhole is WriteInterval of a model computed whole (m.Whole()).
func (w *Warehouse) writeWhole(ctx context.Context, m Model, start, end time.Time) (int64, error) {
	if m.Table == "" {
		return 0, fmt.Errorf("warehouse: write model %q: Table is required", m.Name)
	}
	if m.TimeColumn != "" {
		return 0, fmt.Errorf("warehouse: write model %q: a %s model has no time column (got %q)", m.Name, m.Kind, m.TimeColumn)
	}
	if err := checkKind(m); err != nil {
		return 0, err
	}
	if err := w.EnsureTable(ctx, m); err != nil {
		return 0, err
	}
	if err := w.ensureMeta(ctx); err != nil {
		return 0, err
	}
	release, err := w.lockInterval(ctx, m.Table, everything)
	if err != nil {
		return 0, err
	}
	defer release()
	var rows int64
	switch m.Kind {
	case KindFull:
		rows, err = w.writeFull(ctx, m, start, end)
	case KindView:
		err = w.writeView(ctx, m, start, end)
	case KindSeed:
		rows, err = w.writeSeed(ctx, m, start, end)
	}
	if err != nil {
		return 0, fmt.Errorf("warehouse: compute %s model %s [%s, %s): %w", m.Kind, m.Table, start.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	return rows, nil
}

// wholeTx runs one whole computation of m's object as one transaction,
// within m's timeout: the table's turn among the writers of other
// processes (lockWhole), then, unless this snapshot's record already
// holds a computation stale makes it skip (nothing is written, and
// the computation succeeds), fn in the sandbox's bounds, then the one
// writer record of the object (every older one replaced).
func (w *Warehouse) wholeTx(ctx context.Context, m Model, start, end time.Time, fp string, stale func(old Written) bool,
	fn func(ctx context.Context, c *sql.Conn, timeout time.Duration) (int64, error)) (int64, error) {
	var rows int64
	err := w.bounded(ctx, m, func(ctx context.Context, timeout time.Duration) error {
		return retry(ctx, func() error {
			rows = 0
			return w.inTx(ctx, "BEGIN", func(c *sql.Conn) error {
				if err := w.b.lockWhole(ctx, c, m.Table); err != nil {
					return err
				}
				old, err := scanWritten(ctx, c, "SELECT "+writtenColumns+" FROM "+qualified(MetaSchema, IntervalsTable)+
					" WHERE table_name = $1 AND snapshot = $2", m.Table, m.Snapshot)
				if err != nil {
					return err
				}
				for _, o := range old {
					if stale(o) {
						return nil
					}
				}
				n, err := fn(ctx, c, timeout)
				if err != nil {
					return err
				}
				rows = n
				if _, err := c.ExecContext(ctx, "DELETE FROM "+qualified(MetaSchema, IntervalsTable)+" WHERE table_name = $1", m.Table); err != nil {
					return err
				}
				r := Range{start, end}
				ins, args := insertRecords([]Written{{Table: m.Table, Query: r, Holds: r, Snapshot: m.Snapshot, Fingerprint: fp, Rows: n, At: time.Now().UTC()}})
				_, err = c.ExecContext(ctx, ins, args...)
				return err
			})
		}, retryableWrite)
	})
	return rows, err
}

// olderThan: a computation ending at end is stale against old when old,
// this snapshot's record, was computed as of a later end (an object is
// never recomputed as of an earlier tick). A computation as of the same
// end runs again: it is a restatement's or a catch-up's recompute (its
// upstream's rows changed), or a redelivery, which recomputes the same.
func olderThan(end time.Time) func(Written) bool {
	return func(old Written) bool { return old.Query.End.After(end) }
}

// writeFull replaces the rows of a full model's table by its query over
// [start, end), in one transaction: DELETE every row, INSERT … SELECT in
// the sandbox. A computation older than the one this snapshot last
// recorded (an earlier end) writes nothing.
func (w *Warehouse) writeFull(ctx context.Context, m Model, start, end time.Time) (int64, error) {
	q, err := render(m, paramStart, paramEnd)
	if err != nil {
		return 0, err
	}
	table := qualified(Schema, m.Table)
	ins := fmt.Sprintf("INSERT INTO %s SELECT * FROM (%s) q WHERE %s", table, q, boundsUsed)
	return w.wholeTx(ctx, m, start, end, fingerprintOf(q), olderThan(end), func(ctx context.Context, c *sql.Conn, timeout time.Duration) (int64, error) {
		if _, err := c.ExecContext(ctx, "DELETE FROM "+table); err != nil {
			return 0, err
		}
		if err := w.b.sandbox(ctx, c, timeout); err != nil {
			return 0, err
		}
		n, err := w.b.execOne(ctx, c, ins, start, end)
		if err != nil {
			return 0, err
		}
		return n, w.b.unsandbox(ctx, c)
	})
}

// viewQuery is the query of a view model's view computed over [start,
// end): its macros are the bounds as constants (a view holds no
// parameter).
func viewQuery(m Model, start, end time.Time) (string, error) {
	return render(m, tsLiteral(start), tsLiteral(end))
}

// writeView (re)creates a view model's view over its query computed as
// of [start, end) (CREATE OR REPLACE VIEW, in the sandbox), unless this
// snapshot recorded a newer computation (a later end). No row is written.
// The sandbox owns the view (Postgres): it reads its upstream with the
// sandbox's privileges, never tidemark's; tidemark's user, a member of
// the sandbox role, reads and drops it.
func (w *Warehouse) writeView(ctx context.Context, m Model, start, end time.Time) error {
	q, err := viewQuery(m, start, end)
	if err != nil {
		return err
	}
	fq, err := render(m, paramStart, paramEnd)
	if err != nil {
		return err
	}
	create := "CREATE OR REPLACE VIEW " + qualified(Schema, m.Table) + " AS " + q
	_, err = w.wholeTx(ctx, m, start, end, fingerprintOf(fq), olderThan(end), func(ctx context.Context, c *sql.Conn, timeout time.Duration) (int64, error) {
		if err := w.b.sandbox(ctx, c, timeout); err != nil {
			return 0, err
		}
		if _, err := w.b.execOne(ctx, c, create); err != nil {
			return 0, err
		}
		return 0, w.b.unsandbox(ctx, c)
	})
	return err
}

// ensureView creates a view model's view if it does not exist (computed
// as of no interval: its macros at the epoch), so that an environment
// may point at it before its first computation.
func (w *Warehouse) ensureView(ctx context.Context, m Model) error {
	q, err := viewQuery(m, epoch, epoch)
	if err != nil {
		return err
	}
	// Postgres has no CREATE VIEW IF NOT EXISTS: the view is looked for
	// first, in the same transaction.
	create := "CREATE OR REPLACE VIEW " + qualified(Schema, m.Table) + " AS " + q
	return w.bounded(ctx, m, func(ctx context.Context, timeout time.Duration) error {
		return retry(ctx, func() error {
			return w.inTx(ctx, "BEGIN", func(c *sql.Conn) error {
				var n int
				if err := c.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2", Schema, m.Table).Scan(&n); err != nil || n > 0 {
					return err
				}
				if err := w.b.sandbox(ctx, c, timeout); err != nil {
					return err
				}
				if _, err := w.b.execOne(ctx, c, create); err != nil {
					return err
				}
				return w.b.unsandbox(ctx, c)
			})
		}, retryableDDL)
	})
}

// isView reports whether the object table of schema Schema is a view.
func (w *Warehouse) isView(ctx context.Context, table string) (bool, error) {
	var n int
	err := w.db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2 AND table_type = 'VIEW'", Schema, table).Scan(&n)
	return n > 0, err
}

// seedFingerprint is the fingerprint a seed's load records: a digest of
// its content.
func seedFingerprint(m Model) string { return fingerprintOf("seed\x00" + m.Seed) }

// ensureSeedTable creates a seed model's table, empty, with the columns
// and types DuckDB's CSV reader detects in its content (readSeed).
func (w *Warehouse) ensureSeedTable(ctx context.Context, m Model) error {
	s, err := readSeed(ctx, m.Seed, 0)
	if err != nil {
		return err
	}
	create, err := w.seedCreate(m.Table, s.cols)
	if err != nil {
		return err
	}
	return retry(ctx, func() error {
		return w.inTx(ctx, "BEGIN", func(c *sql.Conn) error {
			if _, err := c.ExecContext(ctx, create); err != nil {
				return err
			}
			return w.b.adoptTable(ctx, c, m.Table, "")
		})
	}, retryableDDL)
}

// seedCreate is the CREATE TABLE IF NOT EXISTS of a seed's table.
func (w *Warehouse) seedCreate(table string, cols []SeedColumn) (string, error) {
	defs := make([]string, len(cols))
	for i, c := range cols {
		t, ok := seedTypeOf(c.Type)
		if !ok {
			return "", fmt.Errorf("seed column %q: type %s has no %s equivalent", c.Name, c.Type, w.b.engine())
		}
		defs[i] = quoteIdent(c.Name) + " " + t
	}
	return "CREATE TABLE IF NOT EXISTS " + qualified(Schema, table) + " (" + strings.Join(defs, ", ") + ")", nil
}

// seedBatchValues bounds the parameters of one INSERT of a seed's rows.
const seedBatchValues = 2000

// writeSeed loads a seed model's table from its content: the rows DuckDB's
// CSV reader gives in the sandbox (readSeed) replace the table's, in one
// transaction, by INSERTs whose every value is a parameter (cast in the
// table's column type). A seed this snapshot already loaded (its content's
// fingerprint recorded) is not loaded again.
func (w *Warehouse) writeSeed(ctx context.Context, m Model, start, end time.Time) (int64, error) {
	fp := seedFingerprint(m)
	s, err := readSeed(ctx, m.Seed, w.timeoutOf(m))
	if err != nil {
		return 0, err
	}
	table := qualified(Schema, m.Table)
	cols := make([]string, len(s.cols))
	casts := make([]string, len(s.cols))
	for i, c := range s.cols {
		cols[i] = quoteIdent(c.Name)
		t, ok := seedTypeOf(c.Type)
		if !ok {
			return 0, fmt.Errorf("seed column %q: type %s has no %s equivalent", c.Name, c.Type, w.b.engine())
		}
		casts[i] = "CAST($%d AS " + t + ")"
	}
	per := max(1, seedBatchValues/max(1, len(cols)))
	same := func(old Written) bool { return old.Fingerprint == fp }
	return w.wholeTx(ctx, m, start, end, fp, same, func(ctx context.Context, c *sql.Conn, _ time.Duration) (int64, error) {
		if _, err := c.ExecContext(ctx, "DELETE FROM "+table); err != nil {
			return 0, err
		}
		var n int64
		for i := 0; i < len(s.rows); i += per {
			chunk := s.rows[i:min(i+per, len(s.rows))]
			var b strings.Builder
			fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", table, strings.Join(cols, ", "))
			args := make([]any, 0, len(chunk)*len(cols))
			for r, row := range chunk {
				if r > 0 {
					b.WriteString(", ")
				}
				b.WriteByte('(')
				for k := range cols {
					if k > 0 {
						b.WriteString(", ")
					}
					args = append(args, row[k])
					fmt.Fprintf(&b, casts[k], len(args))
				}
				b.WriteByte(')')
			}
			res, err := c.ExecContext(ctx, b.String(), args...)
			if err != nil {
				return 0, err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	})
}

// SeedColumn is one column of a seed: its name (the CSV's header, in lower
// case) and the
// type DuckDB's CSV reader detected in its values: BOOLEAN, BIGINT,
// DOUBLE, TIME, DATE, TIMESTAMP or VARCHAR (DuckDB's names).
type SeedColumn struct{ Name, Type string }

// SeedColumns reads a seed's content as a seed's load does (DuckDB's CSV
// reader in a sandbox that reads only that content, within timeout; 0: a
// minute) and returns its columns: those of its table. An error says why
// the content cannot be read as CSV; ErrNoCgo in a build without cgo.
func SeedColumns(ctx context.Context, content string, timeout time.Duration) ([]SeedColumn, error) {
	s, err := readSeed(ctx, content, timeout)
	if err != nil {
		return nil, fmt.Errorf("warehouse: %w", err)
	}
	return s.cols, nil
}

// seedData is a seed's content as DuckDB's CSV reader reads it: its columns,
// and its rows with every value as text (nil: NULL), to be cast back into
// the column's type where they are inserted.
type seedData struct {
	cols []SeedColumn
	rows [][]any
}

// seedTypes are the types the CSV reader may detect (its candidates: a
// column none of them fits is VARCHAR).
var seedTypes = []string{"BOOLEAN", "BIGINT", "DOUBLE", "TIME", "DATE", "TIMESTAMP", "VARCHAR"}
