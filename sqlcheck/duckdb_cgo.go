//go:build cgo

package sqlcheck

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	// DuckDB, for its parser and binder (the warehouse's driver too).
	_ "github.com/duckdb/duckdb-go/v2"
)

// sandboxDSN opens a private in-memory DuckDB that reaches nothing outside
// it (no files, no network, no extensions) and cannot be reconfigured.
const sandboxDSN = "?enable_external_access=false&autoload_known_extensions=false&autoinstall_known_extensions=false" +
	"&allow_community_extensions=false&threads=1&memory_limit=256MB&max_temp_directory_size=0KB&lock_configuration=true"

// sandbox is one check's DuckDB: a fresh in-memory database, one
// connection.
type sandbox struct {
	db   *sql.DB
	conn *sql.Conn
}

func openSandbox(ctx context.Context) (*sandbox, error) {
	db, err := sql.Open("duckdb", sandboxDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlcheck: open DuckDB: %w", err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlcheck: open DuckDB: %w", err)
	}
	return &sandbox{db: db, conn: conn}, nil
}

func (s *sandbox) close() {
	s.conn.Close()
	s.db.Close()
}

// parse is DuckDB's parser on text: its statements, or a *parserError.
func (s *sandbox) parse(ctx context.Context, text string) (*parsed, error) {
	var out string
	if err := s.conn.QueryRowContext(ctx, "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR", text).Scan(&out); err != nil {
		return nil, fmt.Errorf("sqlcheck: json_serialize_sql: %w", err)
	}
	return decodeParsed(out)
}

// bindError is DuckDB refusing to bind a query.
type bindError struct {
	Message string
	Line    int // 0: unknown
}

func (e *bindError) Error() string { return e.Message }

var lineRe = regexp.MustCompile(`(?m)^LINE (\d+):`)

// describe binds query (a SELECT the structural check accepted) without
// running it and returns its columns.
func (s *sandbox) describe(ctx context.Context, query string) ([]column, error) {
	rows, err := s.conn.QueryContext(ctx, "DESCRIBE "+query)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		msg := err.Error()
		be := &bindError{Message: msg}
		if m := lineRe.FindStringSubmatch(msg); m != nil {
			be.Line, _ = strconv.Atoi(m[1])
		}
		if i := strings.Index(msg, "\n\nLINE "); i >= 0 {
			be.Message = msg[:i]
		}
		be.Message = strings.ReplaceAll(strings.TrimSpace(be.Message), "\n", " ")
		return nil, be
	}
	defer rows.Close()
	var cols []column
	for rows.Next() {
		var name, typ string
		var null, key, def, extra sql.NullString
		if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
			return nil, fmt.Errorf("sqlcheck: describe: %w", err)
		}
		cols = append(cols, column{Name: name, Type: typ})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlcheck: describe: %w", err)
	}
	return cols, nil
}

// createTable creates name, empty, with cols: an upstream model as the
// model's query sees it.
func (s *sandbox) createTable(ctx context.Context, name string, cols []column) error {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", quoteIdent(name))
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", quoteIdent(c.Name), c.Type)
	}
	b.WriteString(")")
	if _, err := s.conn.ExecContext(ctx, b.String()); err != nil {
		return &Error{Field: "sql", Msg: fmt.Sprintf("its columns cannot make a table: %v", err)}
	}
	return nil
}

// castError is DuckDB refusing a value of a type (cast).
type castError struct{ Message string }

func (e *castError) Error() string { return e.Message }

// cast casts text v to typ (a type DuckDB described): a *castError when
// v is not a value of it. The text is bound, never spliced.
func (s *sandbox) cast(ctx context.Context, v, typ string) error {
	var out sql.NullString
	err := s.conn.QueryRowContext(ctx, "SELECT CAST(CAST(CAST(? AS VARCHAR) AS "+typ+") AS VARCHAR)", v).Scan(&out)
	if err != nil && ctx.Err() == nil {
		return &castError{Message: strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")}
	}
	return err
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Available reports whether this build has DuckDB's parser (cgo).
func Available() bool { return true }
