package warehouse

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"
)

// The writer of every interval. A forward-only version writes its
// incumbent's table, so one table holds rows of several snapshots (several
// queries); only the warehouse knows which query wrote which slice, so the
// record lives next to the rows: WriteInterval replaces the records of the
// slice it rewrites in the same transaction as the rows, and a record is
// exactly as true as the rows it describes.

// MetaSchema is the schema of tidemark's own bookkeeping in the warehouse.
// It is not Schema: every table in Schema is a snapshot table.
const MetaSchema = "tidemark_meta"

// IntervalsTable is the table (in MetaSchema) of the interval writers.
const IntervalsTable = "intervals"

// Written is the record of one interval write that still holds rows in its
// table.
type Written struct {
	// Table is the snapshot table written (in Schema).
	Table string
	// Query is the interval the query computed (its @start_ts, @end_ts).
	Query Range
	// Holds is the part of Query whose rows this write still holds: all of
	// it, unless a later write of an overlapping interval replaced a part.
	Holds Range
	// Snapshot is Model.Snapshot of the writer ("" when the caller did not
	// name it).
	Snapshot string
	// Fingerprint is Fingerprint of the writer's model.
	Fingerprint string
	// Rows is how many rows the write inserted (over all of Query).
	Rows int64
	// At is when the write committed (the warehouse process's clock).
	At time.Time
}

// Fingerprint identifies what a model computes: a digest of its rendered
// query (its SQL and the upstream tables it reads; a seed: its content).
// Two models with the same fingerprint compute the same rows from the
// same tables.
func Fingerprint(m Model) (string, error) {
	if m.Kind == KindSeed {
		return seedFingerprint(m), nil
	}
	q, err := render(m, paramStart, paramEnd)
	if err != nil {
		return "", fmt.Errorf("warehouse: %w", err)
	}
	return fingerprintOf(q), nil
}

// fingerprintOf is the fingerprint of a rendered query.
func fingerprintOf(rendered string) string {
	sum := sha256.Sum256([]byte(rendered))
	return hex.EncodeToString(sum[:12])
}

// ensureMeta creates MetaSchema and the intervals table if they do not
// exist (once per Warehouse).
func (w *Warehouse) ensureMeta(ctx context.Context) error {
	w.mu.Lock()
	done := w.metaReady
	w.mu.Unlock()
	if done {
		return nil
	}
	create := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  table_name TEXT NOT NULL,
  query_start TIMESTAMP NOT NULL,
  query_end TIMESTAMP NOT NULL,
  holds_start TIMESTAMP NOT NULL,
  holds_end TIMESTAMP NOT NULL,
  snapshot TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  row_count BIGINT NOT NULL,
  written_at TIMESTAMP NOT NULL)`, qualified(MetaSchema, IntervalsTable))
	err := retry(ctx, func() error {
		if _, err := w.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(MetaSchema)); err != nil {
			return err
		}
		if _, err := w.db.ExecContext(ctx, create); err != nil {
			return err
		}
		return w.b.metaIndexes(ctx, w.db)
	}, retryableDDL)
	if err != nil {
		return fmt.Errorf("warehouse: create %s.%s: %w", MetaSchema, IntervalsTable, err)
	}
	w.mu.Lock()
	w.metaReady = true
	w.mu.Unlock()
	return nil
}

// execer is a transaction or a database.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	querier
}

// recordWrite replaces, inside tx, the records of table over r by one
// record of this write: a record that overlaps r keeps only its parts
// outside r (the rows DELETE left in place). When trim is false the caller
// knows that no record overlaps r, and the record is only added.
func recordWrite(ctx context.Context, tx execer, wr Written, trim bool) error {
	var old []Written
	if trim {
		var err error
		if old, err = scanWritten(ctx, tx, deleteRecords, wr.Table, wr.Holds.Start, wr.Holds.End); err != nil {
			return err
		}
	}
	ins, args := insertRecords(replacing(wr, old))
	_, err := tx.ExecContext(ctx, ins, args...)
	return err
}

// deleteRecords deletes the records of table $1 that overlap [$2, $3) and
// returns them.
var deleteRecords = "DELETE FROM " + qualified(MetaSchema, IntervalsTable) +
	" WHERE table_name = $1 AND holds_start < $3 AND holds_end > $2 RETURNING " + writtenColumns

// replacing is the records that replace old, the records of wr's table
// that overlap wr.Holds: wr, and the parts of each of old outside wr.Holds.
func replacing(wr Written, old []Written) []Written {
	r := wr.Holds
	keep := []Written{wr}
	for _, o := range old {
		if o.Holds.Start.Before(r.Start) {
			left := o
			left.Holds.End = r.Start
			keep = append(keep, left)
		}
		if r.End.Before(o.Holds.End) {
			right := o
			right.Holds.Start = r.End
			keep = append(keep, right)
		}
	}
	return keep
}

// insertRecords is the INSERT of recs into the intervals table, and its
// arguments.
func insertRecords(recs []Written) (string, []any) {
	ins := "INSERT INTO " + qualified(MetaSchema, IntervalsTable) + " (" + writtenColumns + ") VALUES "
	var args []any
	for i, k := range recs {
		if i > 0 {
			ins += ", "
		}
		n := len(args)
		ins += fmt.Sprintf("($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9)
		args = append(args, k.Table, k.Query.Start, k.Query.End, k.Holds.Start, k.Holds.End, k.Snapshot, k.Fingerprint, k.Rows, k.At)
	}
	return ins, args
}

// writtenColumns are the intervals table's columns, in Written's order.
const writtenColumns = "table_name, query_start, query_end, holds_start, holds_end, snapshot, fingerprint, row_count, written_at"

// fields are pointers to x's fields in the order of writtenColumns.
func (x *Written) fields() []any {
	return []any{&x.Table, &x.Query.Start, &x.Query.End, &x.Holds.Start, &x.Holds.End, &x.Snapshot, &x.Fingerprint, &x.Rows, &x.At}
}

// utc is x with its times in UTC.
func (x Written) utc() Written {
	x.Query.Start, x.Query.End = x.Query.Start.UTC(), x.Query.End.UTC()
	x.Holds.Start, x.Holds.End, x.At = x.Holds.Start.UTC(), x.Holds.End.UTC(), x.At.UTC()
	return x
}

func scanWritten(ctx context.Context, db querier, q string, args ...any) ([]Written, error) {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Written
	for rs.Next() {
		var x Written
		if err := rs.Scan(x.fields()...); err != nil {
			return nil, err
		}
		out = append(out, x.utc())
	}
	return out, rs.Err()
}

// Writers lists the writes that hold rows of the snapshot table, in order
// of Holds.Start. A table written before writers were recorded has none
// for those intervals.
func (w *Warehouse) Writers(ctx context.Context, table string) ([]Written, error) {
	if err := w.ensureMeta(ctx); err != nil {
		return nil, err
	}
	out, err := scanWritten(ctx, w.db, "SELECT "+writtenColumns+" FROM "+
		qualified(MetaSchema, IntervalsTable)+" WHERE table_name = $1 ORDER BY holds_start", table)
	if err != nil {
		return nil, fmt.Errorf("warehouse: writers of %s: %w", table, err)
	}
	return out, nil
}

// LastWritten is the write of the snapshot table that committed last (ok
// false when none is recorded).
func (w *Warehouse) LastWritten(ctx context.Context, table string) (wr Written, ok bool, err error) {
	if err := w.ensureMeta(ctx); err != nil {
		return Written{}, false, err
	}
	out, err := scanWritten(ctx, w.db, "SELECT "+writtenColumns+" FROM "+
		qualified(MetaSchema, IntervalsTable)+" WHERE table_name = $1 ORDER BY written_at DESC, query_end DESC LIMIT 1", table)
	if err != nil {
		return Written{}, false, fmt.Errorf("warehouse: last write of %s: %w", table, err)
	}
	if len(out) == 0 {
		return Written{}, false, nil
	}
	return out[0], true, nil
}

// forgetTable deletes the writer records of a dropped table.
func (w *Warehouse) forgetTable(ctx context.Context, table string) error {
	if err := w.ensureMeta(ctx); err != nil {
		return err
	}
	_, err := w.db.ExecContext(ctx, "DELETE FROM "+qualified(MetaSchema, IntervalsTable)+" WHERE table_name = $1", table)
	return err
}
