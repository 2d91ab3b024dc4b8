package warehouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// seedSandboxTimeout bounds a seed's reading when the caller gives no
// timeout (a table's creation).
const seedSandboxTimeout = time.Minute

// readSeed reads a seed's CSV content with DuckDB's CSV reader (a header
// row, types detected among seedTypes) in a sandbox that reads that
// content and nothing else: the content is written to a private file
// (0600, in a private temporary directory, removed afterwards), and read
// by a fresh in-memory DuckDB (openSeedSandbox) whose only allowed path
// is that file. The warehouse never reads a file; this one is tidemark's.
func readSeed(ctx context.Context, content string, timeout time.Duration) (seedData, error) {
	if strings.TrimSpace(content) == "" {
		return seedData{}, errors.New("seed: the content is empty (a header row is needed)")
	}
	if timeout <= 0 {
		timeout = seedSandboxTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "tidemark-seed-")
	if err != nil {
		return seedData{}, fmt.Errorf("seed: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "seed.csv")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return seedData{}, fmt.Errorf("seed: %w", err)
	}
	db, err := openSeedSandbox(ctx, path)
	if err != nil {
		return seedData{}, err
	}
	defer db.Close()
	s, err := scanSeed(ctx, db, path)
	if err != nil {
		if ctx.Err() != nil {
			return seedData{}, fmt.Errorf("seed: reading the CSV took longer than %s: %w", timeout, err)
		}
		// The file is tidemark's: the message names the content.
		return seedData{}, fmt.Errorf("seed: reading the CSV: %s", strings.ReplaceAll(err.Error(), path, "(the seed's content)"))
	}
	return s, nil
}

// seedSandboxDSN is the seed sandbox's database: in memory, one thread,
// bounded memory, no temporary files, no extension.
const seedSandboxDSN = ":memory:?threads=1&memory_limit=256MB&max_temp_directory_size=0KB" +
	"&autoload_known_extensions=false&autoinstall_known_extensions=false&allow_community_extensions=false"

// openSeedSandbox opens a fresh in-memory DuckDB (one connection) that may
// read the file at path and nothing else: allowed_paths is [path], then
// enable_external_access is turned off (it cannot be turned back on) and
// the configuration locked (no setting changes again). DuckDB takes
// allowed_paths only at run time, so it cannot go in the DSN.
func openSeedSandbox(ctx context.Context, path string) (*sql.DB, error) {
	db, err := openDuckDB(seedSandboxDSN)
	if err != nil {
		return nil, fmt.Errorf("seed: open the CSV reader's sandbox: %w", err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"SET GLOBAL allowed_paths = [" + sqlString(path) + "]",
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("seed: configuring the CSV reader's sandbox (%s): %w", q, err)
		}
	}
	return db, nil
}

// sqlString is s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// seedRead is the read_csv call over the file $1: RFC 4180 CSV (a header
// row first, ',' between values, '"' quoting, every row as long as the
// header: the dialect is not sniffed), types detected among seedTypes.
var seedRead = "read_csv(CAST($1 AS VARCHAR), header = true, skip = 0, delim = ',', quote = '\"', escape = '\"', strict_mode = true, null_padding = false, " +
	"auto_type_candidates = ['" + strings.Join(seedTypes, "', '") + "'])"

// scanSeed reads the seed file at path in db (the sandbox): its columns
// (named in lower case) and types, then its rows with each value cast to
// text.
func scanSeed(ctx context.Context, db *sql.DB, path string) (seedData, error) {
	var s seedData
	rs, err := db.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "+seedRead+")", path)
	if err != nil {
		return s, err
	}
	for rs.Next() {
		var c SeedColumn
		if err := rs.Scan(&c.Name, &c.Type); err != nil {
			rs.Close()
			return s, err
		}
		s.cols = append(s.cols, c)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return s, err
	}
	if len(s.cols) == 0 {
		return s, errors.New("no column")
	}
	if len(s.cols) > maxSeedColumns {
		return s, fmt.Errorf("%d columns: a seed has at most %d (a Postgres table's columns)", len(s.cols), maxSeedColumns)
	}
	for _, c := range s.cols {
		if strings.ContainsRune(c.Name, 0) || !utf8.ValidString(c.Name) {
			return s, fmt.Errorf("column name %q is not valid UTF-8 text", c.Name)
		}
		if len(c.Name) > maxIdent {
			return s, fmt.Errorf("column name %q is %d bytes: at most %d (a warehouse identifier; Postgres cuts longer ones)", c.Name, len(c.Name), maxIdent)
		}
	}
	sel := make([]string, len(s.cols))
	for i, c := range s.cols {
		sel[i] = "CAST(" + quoteIdent(c.Name) + " AS VARCHAR)"
	}
	rs, err = db.QueryContext(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM "+seedRead, path)
	if err != nil {
		return s, err
	}
	defer rs.Close()
	for rs.Next() {
		vals := make([]sql.NullString, len(s.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return s, err
		}
		row := make([]any, len(vals))
		for i, v := range vals {
			if v.Valid {
				row[i] = v.String
			}
		}
		s.rows = append(s.rows, row)
	}
	if err := rs.Err(); err != nil {
		return s, err
	}
	// The header names the columns as unquoted identifiers do: in lower
	// case (SQLMesh normalizes a DuckDB seed's names so), so a query
	// naming them unquoted reads them in Postgres too, which folds
	// unquoted names to lower case.
	seen := map[string]string{}
	for i, c := range s.cols {
		name := strings.ToLower(c.Name)
		if first, dup := seen[name]; dup {
			return s, fmt.Errorf("columns %q and %q are one name in lower case, as a seed's columns are named", first, c.Name)
		}
		seen[name] = c.Name
		s.cols[i].Name = name
	}
	return s, nil
}

// maxSeedColumns bounds a seed's columns: a Postgres table has at most
// 1600.
const maxSeedColumns = 1600

// seedTypeOf is the warehouse type of a seed column's detected type,
// written the same in DuckDB and Postgres (VARCHAR is TEXT, DOUBLE is
// DOUBLE PRECISION, which DuckDB reads as DOUBLE); false for a type the
// reader was not allowed to detect.
func seedTypeOf(t string) (string, bool) {
	switch t {
	case "BOOLEAN", "BIGINT", "TIME", "DATE", "TIMESTAMP":
		return t, true
	case "DOUBLE":
		return "DOUBLE PRECISION", true
	case "VARCHAR":
		return "TEXT", true
	}
	return "", false
}
