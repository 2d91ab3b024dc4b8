package warehouse

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Model is what the warehouse needs to know of one model's snapshot.
type Model struct {
	// Name is the model's name; an environment's view is <env>.<Name>.
	Name string
	// Table is the snapshot table in schema "tidemark" (e.g. "hourly__3f2a9c").
	Table string
	// SQL is one SELECT (it may start with its own WITH) over sources and
	// upstream model names. It refers to the interval as @start_ts and
	// @end_ts.
	SQL string
	// TimeColumn is the column of the query's rows that places them in an
	// interval (a TIMESTAMP holding UTC).
	TimeColumn string
	// Upstream maps each upstream model name the SQL reads to that
	// upstream snapshot's table in schema "tidemark".
	Upstream map[string]string
	// Snapshot names the snapshot this model is (e.g. "agg@v2"); a write
	// records it as the interval's writer (Writers). Optional.
	Snapshot string
	// Timeout bounds one computation of the model (an interval's write, its
	// table's creation, a verification); 0 means Options.ModelTimeout.
	Timeout time.Duration
}

// Range is a half-open interval of time [Start, End).
type Range struct {
	Start, End time.Time
}

// Schema is the schema of the snapshot tables.
const Schema = "tidemark"

// quoteIdent quotes an identifier the way both DuckDB and Postgres read it.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// qualified is schema.name, both quoted.
func qualified(schema, name string) string {
	return quoteIdent(schema) + "." + quoteIdent(name)
}

// plainIdent reports whether s is a lower-case SQL identifier that reads
// the same quoted and unquoted in both engines.
func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// The forms @start_ts and @end_ts take in rendered SQL.
const (
	paramStart = "CAST($1 AS TIMESTAMP)"
	paramEnd   = "CAST($2 AS TIMESTAMP)"
	// nullTS stands for both bounds where no parameters may be bound
	// (table creation in Postgres: DDL takes no parameters). It is a
	// constant, not a value: the table is created from LIMIT 0.
	nullTS = "CAST(NULL AS TIMESTAMP)"
)

// render turns model SQL into runnable SQL: the upstream CTE prefix, and
// @start_ts/@end_ts replaced by start/end (paramStart/paramEnd, or nullTS).
// It refuses any other @name, and positional parameters of its own.
func render(m Model, start, end string) (string, error) {
	body, err := substituteMacros(m.SQL, start, end)
	if err != nil {
		return "", fmt.Errorf("model %q: %w", m.Name, err)
	}
	if len(m.Upstream) == 0 {
		return "SELECT * FROM (" + body + "\n) q", nil
	}
	names := make([]string, 0, len(m.Upstream))
	for n := range m.Upstream {
		if !plainIdent(n) {
			return "", fmt.Errorf("model %q: upstream name %q is not a plain lower-case identifier (the CTE binding cannot cover it)", m.Name, n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("WITH ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s AS (SELECT * FROM %s)", quoteIdent(n), qualified(Schema, m.Upstream[n]))
	}
	b.WriteString("\nSELECT * FROM (" + body + "\n) q")
	return b.String(), nil
}

// substituteMacros replaces @start_ts and @end_ts outside string literals,
// quoted identifiers and comments.
func substituteMacros(sql, start, end string) (string, error) {
	var b strings.Builder
	err := scanSQL(sql, func(i int, c byte) (int, error) {
		switch {
		case c == '@' && i+1 < len(sql) && isIdentStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
			switch name := sql[i+1 : j]; strings.ToLower(name) {
			case "start_ts":
				b.WriteString(start)
			case "end_ts":
				b.WriteString(end)
			default:
				return 0, fmt.Errorf("unknown macro @%s: only @start_ts and @end_ts are supported", name)
			}
			return j, nil
		case c == '$' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9':
			return 0, fmt.Errorf("positional parameter at offset %d: use @start_ts and @end_ts", i)
		case c == '?':
			return 0, fmt.Errorf("parameter placeholder ? at offset %d: use @start_ts and @end_ts", i)
		}
		b.WriteByte(c)
		return i + 1, nil
	}, func(s string) { b.WriteString(s) })
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// scanSQL walks sql, handing every byte outside literals, quoted
// identifiers and comments to code (which returns where to go on), and
// every literal, quoted identifier or comment whole to verbatim.
func scanSQL(sql string, code func(i int, c byte) (int, error), verbatim func(string)) error {
	for i := 0; i < len(sql); {
		c := sql[i]
		var end int
		switch {
		case c == '\'' || c == '"':
			end = i + 1
			for end < len(sql) {
				if sql[end] == c {
					if end+1 < len(sql) && sql[end+1] == c { // doubled quote
						end += 2
						continue
					}
					break
				}
				end++
			}
			if end >= len(sql) {
				return fmt.Errorf("unterminated %c at offset %d", c, i)
			}
			end++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			end = strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql)
			} else {
				end += i + 1
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			k := strings.Index(sql[i+2:], "*/")
			if k < 0 {
				return fmt.Errorf("unterminated comment at offset %d", i)
			}
			end = i + 2 + k + 2
		default:
			next, err := code(i, c)
			if err != nil {
				return err
			}
			i = next
			continue
		}
		verbatim(sql[i:end])
		i = end
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// readOnlyStatement reports why sql is not one read-only statement, or "".
func readOnlyStatement(sql string) string {
	var code strings.Builder
	err := scanSQL(sql, func(i int, c byte) (int, error) {
		code.WriteByte(c)
		return i + 1, nil
	}, func(s string) {
		if strings.HasPrefix(s, "--") || strings.HasPrefix(s, "/*") {
			code.WriteByte(' ')
			return
		}
		code.WriteString("''") // a literal's content is not code
	})
	if err != nil {
		return err.Error()
	}
	text := strings.TrimRight(strings.TrimSpace(code.String()), "; \t\r\n")
	if strings.Contains(text, ";") {
		return "more than one statement"
	}
	first := strings.ToUpper(strings.TrimLeft(text, "( \t\r\n"))
	if k := strings.IndexFunc(first, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r == '_') }); k >= 0 {
		first = first[:k]
	}
	if first == "EXPLAIN" && strings.Contains(strings.ToUpper(text), "ANALY") {
		return "EXPLAIN ANALYZE runs its statement"
	}
	switch first {
	case "SELECT", "WITH", "SHOW", "DESCRIBE", "EXPLAIN", "VALUES", "TABLE", "FROM", "SUMMARIZE":
		return ""
	case "":
		return "empty statement"
	}
	return first + " is not a read-only statement"
}
