//go:build !cgo

package sqlcheck

import "context"

// Without cgo there is no DuckDB: every check fails with ErrNoParser.
type sandbox struct{}

func openSandbox(context.Context) (*sandbox, error) { return nil, ErrNoParser }

func (*sandbox) close() {}

func (*sandbox) parse(context.Context, string) (*parsed, error) { return nil, ErrNoParser }

func (*sandbox) describe(context.Context, string) ([]column, error) { return nil, ErrNoParser }

func (*sandbox) createTable(context.Context, string, []column) error { return ErrNoParser }

func (*sandbox) cast(context.Context, string, string) error { return ErrNoParser }

// castError is never produced without DuckDB.
type castError struct{ Message string }

func (e *castError) Error() string { return e.Message }

// bindError is never produced without DuckDB.
type bindError struct {
	Message string
	Line    int
}

func (e *bindError) Error() string { return e.Message }

// Available reports whether this build has DuckDB's parser (cgo).
func Available() bool { return false }
