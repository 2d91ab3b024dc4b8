package warehouse

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTruncated is returned by Query when the answer is larger than the
// warehouse's query limits (QueryLimited returns the rows that fit).
var ErrTruncated = errors.New("warehouse: the answer exceeds the query limits")

// Limits bound a query's answer: at most Rows rows, and at most Bytes
// bytes of the answer as JSON (Result.Size: the columns and every row
// kept, as encoding/json writes them).
type Limits struct {
	Rows  int
	Bytes int
}

// DefaultLimits are the limits of a Warehouse whose Options set none.
var DefaultLimits = Limits{Rows: 10_000, Bytes: 4 << 20}

// Limits are the query limits of w (Options.QueryLimits, defaults
// filled).
func (w *Warehouse) Limits() Limits { return w.limits }

// orDefault fills the zero fields of l from DefaultLimits.
func (l Limits) orDefault() Limits {
	if l.Rows <= 0 {
		l.Rows = DefaultLimits.Rows
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultLimits.Bytes
	}
	return l
}

// Result is a query's answer: its columns and the rows that fit the
// limits, in order. Truncated says the statement had more rows than Rows
// holds: the reading stopped at the limit.
type Result struct {
	Columns   []string
	Rows      [][]any
	Truncated bool
	// Size is the JSON size of Columns and Rows (what Limits.Bytes bounds).
	Size int
}

// resultOverhead bounds the JSON of a reply around its columns and rows
// ({"columns":,"rows":[],"truncated":true}, and the brackets).
const resultOverhead = 64

// QueryLimited runs one read-only statement (SELECT, WITH, SHOW,
// DESCRIBE, EXPLAIN, VALUES, TABLE, FROM, SUMMARIZE; anything else is
// refused with ErrNotReadOnly) in a read-only transaction, in the sandbox
// (Postgres: SandboxRole, statement_timeout from ctx's deadline or the
// model timeout), as exactly one statement: a text of several is refused
// by the engine, so a statement cannot end the transaction. It reads the
// rows as they come and stops at lim (zero fields: DefaultLimits).
func (w *Warehouse) QueryLimited(ctx context.Context, q string, lim Limits) (Result, error) {
	lim = lim.orDefault()
	if why := readOnlyStatement(q); why != "" {
		return Result{}, fmt.Errorf("%w: %s", ErrNotReadOnly, why)
	}
	timeout := w.modelTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	res := Result{Rows: [][]any{}}
	err := w.inReadOnlyTx(ctx, func(c *sql.Conn) error {
		if err := w.b.sandbox(ctx, c, timeout); err != nil {
			return err
		}
		// One row more than the limit: reading it says the answer was
		// truncated.
		bounded, err := w.b.limitRows(ctx, c, q, lim.Rows+1)
		if err != nil {
			return err
		}
		return w.b.queryOne(ctx, c, bounded, nil, func(cols []string, row []any) (bool, error) {
			if res.Columns == nil {
				res.Columns = cols
				b, err := json.Marshal(cols)
				if err != nil {
					return false, err
				}
				res.Size = len(b) + resultOverhead
			}
			if len(res.Rows) >= lim.Rows {
				res.Truncated = true
				return false, nil
			}
			b, err := json.Marshal(row)
			if err != nil {
				return false, fmt.Errorf("row %d: %w", len(res.Rows)+1, err)
			}
			if res.Size+len(b)+1 > lim.Bytes {
				res.Truncated = true
				return false, nil
			}
			res.Size += len(b) + 1
			res.Rows = append(res.Rows, row)
			return true, nil
		})
	})
	if err != nil {
		return Result{}, fmt.Errorf("warehouse: query: %w", err)
	}
	if res.Columns == nil {
		res.Columns = []string{}
	}
	return res, nil
}

// isStatementTimeout reports Postgres's statement_timeout cancelling a
// statement.
func isStatementTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "57014"
}

// queryAll runs q (built from model SQL) in a read-only transaction in the
// sandbox, as one statement, within m's timeout, and returns every row.
func (w *Warehouse) queryAll(ctx context.Context, m Model, q string, args ...any) (cols []string, rows [][]any, err error) {
	err = w.bounded(ctx, m, func(ctx context.Context, timeout time.Duration) error {
		return w.inReadOnlyTx(ctx, func(c *sql.Conn) error {
			if err := w.b.sandbox(ctx, c, timeout); err != nil {
				return err
			}
			return w.b.queryOne(ctx, c, q, args, func(cs []string, row []any) (bool, error) {
				cols = cs
				rows = append(rows, row)
				return true, nil
			})
		})
	})
	return cols, rows, err
}
