package sqlmesh

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func utc(s string) time.Time {
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return ts.UTC()
}

func ident(s string, line int) Value { return Value{Kind: Ident, Text: s, Line: line} }
func str(s string, line int) Value   { return Value{Kind: String, Text: s, Line: line} }
func num(s string, line int) Value   { return Value{Kind: Number, Text: s, Line: line} }

// TestParseModelFixtures: each fixture model reads to exactly the Model
// written here: every property, nested groups, comments in odd places,
// trailing commas, escaped quotes, schema-qualified and quoted names,
// unknown properties kept.
func TestParseModelFixtures(t *testing.T) {
	tests := []struct {
		file string
		want Model
	}{
		{"orders.sql", Model{
			Line: 6, Name: "sales.orders", Schema: "sales", Short: "orders",
			Kind: Kind{Name: KindIncrementalByTimeRange, Line: 8, TimeColumn: "order_ts", BatchSize: 7, Lookback: 2, BatchConcurrency: 3,
				Settings: map[string]Value{
					"time_column": ident("order_ts", 9), "batch_size": num("7", 10),
					"lookback": num("2", 11), "batch_concurrency": num("3", 12),
				}},
			Cron: "@daily", Start: utc("2024-01-01T00:00:00Z"), Owner: "ann",
			Description: `Orders; it's the "main" fact table`,
			Grain:       []string{"order_id", "line_no"},
			DependsOn:   []string{"raw.orders", "raw.order lines"},
			Audits: []AuditCall{
				{Name: "NUMBER_OF_ROWS", Line: 21, Args: map[string]Value{"threshold": num("0", 21)}},
				{Name: "not_null", Line: 22, Args: map[string]Value{"columns": {Kind: List, Text: "[order_id, amount]", Line: 22,
					List: []Value{ident("order_id", 22), ident("amount", 22)}}}},
				{Name: "accepted_values", Line: 23, Args: map[string]Value{
					"column": ident("status", 23),
					"is_in": {Kind: List, Text: "('new', 'paid', 'it''s')", Line: 23,
						List: []Value{str("new", 23), str("paid", 23), str("it's", 23)}}}},
				{Name: "assert_positive_amount", Line: 24},
			},
			Columns: []Column{
				{Name: "order_id", Type: "INT", Line: 27},
				{Name: "line_no", Type: "INTEGER", Line: 28},
				{Name: "amount", Type: "DECIMAL(12, 2)", Line: 29},
				{Name: "status", Type: "TEXT", Line: 30},
				{Name: "order_ts", Type: "TIMESTAMP", Line: 31},
			},
			Unknown: []Property{
				{Name: "TAGS", Raw: `[finance, "daily"]`, Line: 33},
				{Name: "physical_properties", Raw: `(retention := (days := 30, note := 'a (b) [c]'))`, Line: 34},
			},
			Query: "-- the query is kept verbatim, comments included\n" +
				"SELECT o.order_id, o.line_no, o.amount, o.status, o.order_ts\n" +
				"FROM raw.orders AS o\n" +
				"WHERE o.order_ts BETWEEN @start_ts AND @end_ts;",
			QueryLine: 37,
		}},
		{"seed.sql", Model{
			Line: 1, Name: "Ref.Countries", Schema: "Ref", Short: "Countries",
			Kind:      Kind{Name: KindSeed, Line: 1, Path: "../seeds/countries.csv", Settings: map[string]Value{"path": str("../seeds/countries.csv", 1)}},
			Columns:   []Column{{Name: "code", Type: "VARCHAR(2)", Line: 1}, {Name: "name", Type: "TEXT", Line: 1}},
			Query:     "SELECT 1",
			QueryLine: 1,
		}},
		{"view.sql", Model{
			Line: 2, Name: `"analytics db"."Order Totals"`, Schema: "analytics db", Short: "Order Totals",
			Kind:  Kind{Name: KindView, Line: 8},
			Owner: "ann", Dialect: "duckdb", Grain: []string{"order_id"},
			Query:     "SELECT order_id, sum(amount) AS total\nFROM sales.orders\nGROUP BY order_id",
			QueryLine: 9,
		}},
		{"daily.sql", Model{
			Line: 1, Name: "warehouse.sales.daily", Schema: "warehouse.sales", Short: "daily",
			Kind: Kind{Name: KindFull, Line: 3, Settings: map[string]Value{}},
			Cron: "0 * * * *", Start: utc("2024-01-01T00:00:00Z"),
			Grain: []string{"day", "region"}, DependsOn: []string{"sales.orders"},
			Audits: []AuditCall{{Name: "unique_values", Line: 8, Args: map[string]Value{
				"columns":  {Kind: List, Text: "(day, region)", Line: 8, List: []Value{ident("day", 8), ident("region", 8)}},
				"blocking": {Kind: Bool, Text: "false", Line: 8},
				"rate":     num("0.5", 8),
				"strict":   {Kind: Bool, Text: "true", Line: 8},
			}}},
			Query:     "SELECT 1 AS x",
			QueryLine: 10,
		}},
		{"formatted.sql", Model{
			Line: 1, Name: "s.m", Schema: "s", Short: "m",
			Kind: Kind{Name: KindIncrementalByTimeRange, Line: 3, TimeColumn: "ds", TimeFormat: "%Y-%m-%d",
				Settings: map[string]Value{"time_column": {Kind: List, Text: "(ds, '%Y-%m-%d')", Line: 3,
					List: []Value{ident("ds", 3), str("%Y-%m-%d", 3)}}}},
			Start:     utc("2024-03-05T04:07:08Z"),
			Unknown:   []Property{{Name: "interval_unit", Raw: "'hour'", Line: 5}},
			Query:     "WITH x AS (SELECT 1)\n  SELECT * FROM x",
			QueryLine: 8,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "models", tt.file)
			got, err := ParseModel(path, read(t, path))
			if err != nil {
				t.Fatal(err)
			}
			tt.want.File = path
			got.Lines = nil // TestPropertyLines
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

// TestPropertyLines: Lines says where each property given starts.
func TestPropertyLines(t *testing.T) {
	path := filepath.Join("testdata", "models", "orders.sql")
	m, err := ParseModel(path, read(t, path))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"name": 7, "kind": 8, "cron": 14, "start": 15, "owner": 16, "description": 17, "grain": 18,
		"depends_on": 19, "audits": 20, "columns": 26, "tags": 33, "physical_properties": 34}
	if !reflect.DeepEqual(m.Lines, want) {
		t.Errorf("Lines %v, want %v", m.Lines, want)
	}
}

// TestSeedWithoutQuery: a SEED model has no query (SQLMesh's seeds have
// none); any other kind must have one.
func TestSeedWithoutQuery(t *testing.T) {
	m, err := ParseModel("seed.sql", []byte("MODEL (name ref.countries, kind SEED (path 'c.csv'));\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Query != "" || m.QueryLine != 0 || m.Kind.Path != "c.csv" {
		t.Errorf("%+v", m)
	}
	_, err = ParseModel("full.sql", []byte("MODEL (name s.m, kind FULL);\n"))
	if err == nil || err.Error() != "full.sql:1: query: missing: a query must follow the MODEL block" {
		t.Errorf("got %v", err)
	}
}

// TestQueryVerbatim: the query is the file's bytes from its first
// non-blank character, and QueryLine is where they are.
func TestQueryVerbatim(t *testing.T) {
	path := filepath.Join("testdata", "models", "orders.sql")
	src := read(t, path)
	m, err := ParseModel(path, src)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(src), m.Query)
	if i < 0 {
		t.Fatal("query is not a substring of the file")
	}
	if line := 1 + strings.Count(string(src[:i]), "\n"); line != m.QueryLine {
		t.Errorf("QueryLine %d, the query starts on line %d", m.QueryLine, line)
	}
}

// TestParseModelInline: small inputs for the tokenizer's corners.
func TestParseModelInline(t *testing.T) {
	tests := []struct {
		name, src string
		check     func(t *testing.T, m *Model)
	}{
		{"comments between every token", "/*a*/MODEL/*b*/(/*c*/name/*d*/s.m/*e*/,--f\nkind--g\nFULL/*h*/,/*i*/)/*j*/;--k\nSELECT 1", func(t *testing.T, m *Model) {
			if m.Name != "s.m" || m.Kind.Name != KindFull || m.Query != "--k\nSELECT 1" || m.QueryLine != 3 {
				t.Errorf("%+v", m)
			}
		}},
		{"keywords in any case", "model(NAME s.m, KIND incremental_by_time_range(TIME_COLUMN ts, BATCH_SIZE := 2)) select 1", func(t *testing.T, m *Model) {
			if m.Kind.Name != KindIncrementalByTimeRange || m.Kind.TimeColumn != "ts" || m.Kind.BatchSize != 2 || m.Query != "select 1" {
				t.Errorf("%+v", m)
			}
		}},
		{"no semicolon, query on the same line", "MODEL (name s.m) SELECT 2", func(t *testing.T, m *Model) {
			if m.Query != "SELECT 2" || m.QueryLine != 1 {
				t.Errorf("%+v", m)
			}
		}},
		{"doubled quotes in names and strings", `MODEL (name "a""b".c, owner 'o''k', description '') SELECT 1`, func(t *testing.T, m *Model) {
			if m.Schema != `a"b` || m.Short != "c" || m.Owner != "o'k" || m.Description != "" {
				t.Errorf("%+v", m)
			}
		}},
		{"string name split", "MODEL (name 'a.b') SELECT 1", func(t *testing.T, m *Model) {
			if m.Name != "a.b" || m.Schema != "a" || m.Short != "b" {
				t.Errorf("%+v", m)
			}
		}},
		{"start timestamp without zone is UTC", "MODEL (name a.b, start '2024-02-03 04:05:06') SELECT 1", func(t *testing.T, m *Model) {
			if !m.Start.Equal(utc("2024-02-03T04:05:06Z")) || m.Start.Location() != time.UTC {
				t.Errorf("%v", m.Start)
			}
		}},
		{"other kinds kept with their settings", "MODEL (name a.b, kind SCD_TYPE_2 (unique_key [id], valid_from_name x)) SELECT 1", func(t *testing.T, m *Model) {
			if m.Kind.Name != "SCD_TYPE_2" || m.Kind.Settings["unique_key"].Kind != List || m.Kind.Settings["valid_from_name"].Text != "x" {
				t.Errorf("%+v", m.Kind)
			}
		}},
		{"unknown with nested brackets and strings", "MODEL (name a.b, x ([1, (2, ')')], \"]\"),) SELECT 1", func(t *testing.T, m *Model) {
			want := []Property{{Name: "x", Raw: `([1, (2, ')')], "]")`, Line: 1}}
			if !reflect.DeepEqual(m.Unknown, want) {
				t.Errorf("%+v", m.Unknown)
			}
		}},
		{"expression setting kept as written", "MODEL (name a.b, kind VIEW (materialized true, x 1 + 2)) SELECT 1", func(t *testing.T, m *Model) {
			if v := m.Kind.Settings["x"]; v.Kind != Expr || v.Text != "1 + 2" {
				t.Errorf("%+v", v)
			}
			if v := m.Kind.Settings["materialized"]; v.Kind != Bool || v.Text != "true" {
				t.Errorf("%+v", v)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseModel("inline.sql", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, m)
		})
	}
}

// TestParseAuditFixtures: one audit, and two audits in one file.
func TestParseAuditFixtures(t *testing.T) {
	tests := []struct {
		file string
		want []*AuditDef
	}{
		{"single.sql", []*AuditDef{{
			Line: 2, Name: "assert_positive_amount", Blocking: false, Dialect: "duckdb", Description: "amounts are positive",
			Query: "SELECT * FROM @this_model WHERE amount <= 0", QueryLine: 8,
		}}},
		{"multi.sql", []*AuditDef{{
			Line: 1, Name: "no_future", Blocking: true,
			Defaults: map[string]Value{"horizon": num("1", 1), "column": ident("order_ts", 1),
				"labels": {Kind: List, Text: "['a', 'b']", Line: 1, List: []Value{str("a", 1), str("b", 1)}}},
			Query:     "SELECT * FROM @this_model\nWHERE @column > now() + INTERVAL (@horizon) DAY;",
			QueryLine: 2,
		}, {
			Line: 5, Name: "Standalone Check", Blocking: true, Standalone: true,
			Unknown:   []Property{{Name: "severity", Raw: "'high'", Line: 5}},
			Query:     "SELECT 1 WHERE false;",
			QueryLine: 6,
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "audits", tt.file)
			got, err := ParseAudit(path, read(t, path))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tt.want {
				a.File = path
			}
			if !reflect.DeepEqual(got, tt.want) {
				for i := range got {
					t.Logf("got[%d] %+v", i, *got[i])
				}
				t.Errorf("want %d audits as written", len(tt.want))
			}
		})
	}
}

// TestParseErrors: each malformed file gives its file:line: property error,
// an *Error matching ErrInvalid. Files named audit_* are audit files.
func TestParseErrors(t *testing.T) {
	tests := []struct{ file, want string }{
		{"no_model.sql", "no_model.sql:2: expected MODEL (…), got 'SELECT'"},
		{"kind_paren.sql", "kind_paren.sql:4: kind: expected a kind name, got '('"},
		{"unnamed.sql", "unnamed.sql:1: name: missing: every model needs a name schema.model"},
		{"unqualified.sql", "unqualified.sql:2: name: expected a schema-qualified name schema.model, got 'orders'"},
		{"unterminated_string.sql", "unterminated_string.sql:3:15: description: unterminated string"},
		{"unclosed_block.sql", "unclosed_block.sql:1: MODEL ( opened here is never closed"},
		{"unclosed_bracket.sql", "unclosed_bracket.sql:3:9: grain: '[' opened here is never closed"},
		{"duplicate.sql", "duplicate.sql:4: cron: set twice (first on line 3)"},
		{"bad_start.sql", "bad_start.sql:3: start: expected a date 'YYYY-MM-DD' or an ISO timestamp, got 'yesterday'"},
		{"batch_size.sql", "batch_size.sql:5: kind: INCREMENTAL_BY_TIME_RANGE: batch_size: expected a whole number >= 1, got '0'"},
		{"lookback.sql", "lookback.sql:3: kind: INCREMENTAL_BY_TIME_RANGE: lookback: expected a whole number >= 0, got 'two'"},
		{"no_time_column.sql", "no_time_column.sql:3: kind: INCREMENTAL_BY_TIME_RANGE: missing time_column"},
		{"seed_no_path.sql", "seed_no_path.sql:3: kind: SEED: path: expected a path in quotes, got 'countries'"},
		{"cron_bare.sql", "cron_bare.sql:3: cron: expected a cron expression in quotes, got 'daily'"},
		{"audits_arg.sql", "audits_arg.sql:4: audits: audit not_null: expected an argument name := value, got 'columns [a, b]'"},
		{"audits_not_list.sql", "audits_not_list.sql:3: audits: expected a list (…) of audits, got 'not_null'"},
		{"column_no_type.sql", "column_no_type.sql:5: columns: column amount: missing its type"},
		{"no_query.sql", "no_query.sql:3: query: missing: a query must follow the MODEL block"},
		{"unterminated_comment.sql", "unterminated_comment.sql:2:13: unterminated /* comment"},
		{"property_string.sql", "property_string.sql:2: expected a property name, got 'name'"},
		{"missing_comma.sql", "missing_comma.sql:3: name: expected one value, got 'kind' after it (a missing comma?)"},
		{"assign_key.sql", "assign_key.sql:3: audits: expected one name before ':='"},
		{"empty_value.sql", "empty_value.sql:3: owner: missing value, got ','"},
		{"double_comma.sql", "double_comma.sql:3: grain: expected a value or ']', got ','"},
		{"kind_extra.sql", "kind_extra.sql:3: kind: FULL: expected '(' settings ')' or ',', got 'FULL'"},
		{"dup_setting.sql", "dup_setting.sql:3: kind: INCREMENTAL_BY_TIME_RANGE: setting time_column set twice"},
		{"empty_name_part.sql", "empty_name_part.sql:2: name: empty part in name 'a..b'"},
		{"audit_no_name.sql", "audit_no_name.sql:1: name: missing: every audit needs a name"},
		{"audit_blocking.sql", "audit_blocking.sql:3: blocking: expected true or false, got 'maybe'"},
		{"audit_dup.sql", "audit_dup.sql:4: name: audit A defined twice (first on line 1)"},
		{"audit_no_query.sql", "audit_no_query.sql:1: query: missing: a query must follow the AUDIT block"},
		{"audit_defaults.sql", "audit_defaults.sql:3: defaults: expected name := value, got 'threshold 1'"},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("%d files in testdata/bad, %d cases: every file needs a case", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "bad", tt.file)
			src := read(t, path)
			var err error
			if strings.HasPrefix(tt.file, "audit_") {
				_, err = ParseAudit(path, src)
			} else {
				_, err = ParseModel(path, src)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if want := filepath.Join("testdata", "bad", tt.want); err.Error() != want {
				t.Errorf("got  %s\nwant %s", err, want)
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.File != path {
				t.Errorf("not an *Error of %s matching ErrInvalid: %#v", path, err)
			}
		})
	}
}

// TestLexer: the tokenizer's kinds and values.
func TestLexer(t *testing.T) {
	src := "a_1 \"q \"\"x\"\"\" 'it''s' -1.5e3 2 ( ) [ ] , ; . := = @x -- c\n/* c\n*/ é$"
	want := []struct {
		kind tokKind
		text string
	}{
		{tIdent, "a_1"}, {tQIdent, `q "x"`}, {tString, "it's"}, {tNumber, "-1.5e3"}, {tNumber, "2"},
		{tLParen, "("}, {tRParen, ")"}, {tLBrack, "["}, {tRBrack, "]"}, {tComma, ","}, {tSemi, ";"},
		{tDot, "."}, {tAssign, ":="}, {tOther, "="}, {tOther, "@"}, {tIdent, "x"}, {tIdent, "é$"}, {tEOF, ""},
	}
	lx := newLexer("f", []byte(src), 0, 1, 1)
	for i, w := range want {
		tok, err := lx.next()
		if err != nil {
			t.Fatal(err)
		}
		if tok.kind != w.kind || tok.text != w.text {
			t.Errorf("token %d: got %d %q, want %d %q", i, tok.kind, tok.text, w.kind, w.text)
		}
	}
	if lx.line != 3 {
		t.Errorf("line %d after two newlines", lx.line)
	}
}

// FuzzParseModel: no input panics, and an accepted model has a name and a
// query that is part of its input.
func FuzzParseModel(f *testing.F) {
	for _, dir := range []string{"models", "bad", "audits"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.sql"))
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Add([]byte("MODEL (name a.b, x ((([[,]]))), y 'a''', z \"\"\"\"); SELECT 1"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := ParseModel("fuzz.sql", src)
		if err == nil {
			if m.Name == "" || m.Schema == "" || m.Short == "" || m.Query == "" || !strings.Contains(string(src), m.Query) {
				t.Errorf("accepted without a name or query: %+v", m)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Errorf("error not an *Error: %v", err)
		}
		as, err := ParseAudit("fuzz.sql", src)
		if err == nil {
			for _, a := range as {
				if a.Name == "" || a.Query == "" {
					t.Errorf("accepted without a name or query: %+v", a)
				}
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Errorf("error not an *Error: %v", err)
		}
	})
}

// TestSubstituteParams: @names are replaced outside literals, quoted
// identifiers and comments, the rest kept byte for byte; the @names not
// given are listed with their lines.
func TestSubstituteParams(t *testing.T) {
	q := "SELECT * FROM @this_model -- @column here stays\n" +
		"WHERE @COLUMN < 0 /* @column */ AND note <> '@column' AND \"@column\" IS NULL\n" +
		"  AND n > @threshold AND@column=1 AND @ column = 2"
	got, left, err := SubstituteParams("a.sql", q, map[string]string{"column": "amount"})
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT * FROM @this_model -- @column here stays\n" +
		"WHERE amount < 0 /* @column */ AND note <> '@column' AND \"@column\" IS NULL\n" +
		"  AND n > @threshold ANDamount=1 AND @ column = 2"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	wantLeft := []Param{{Name: "this_model", Line: 1, Off: 14}, {Name: "threshold", Line: 3, Off: strings.Index(q, "@threshold")}}
	if !reflect.DeepEqual(left, wantLeft) {
		t.Errorf("left %+v, want %+v", left, wantLeft)
	}
	if _, _, err := SubstituteParams("a.sql", "SELECT 'open", nil); err == nil || !strings.Contains(err.Error(), "a.sql:1:8: unterminated string") {
		t.Errorf("unterminated: %v", err)
	}
}

// TestValueSQL: a value as an audit's query writes it.
func TestValueSQL(t *testing.T) {
	for _, tt := range []struct {
		v    Value
		want string
	}{
		{ident("amount", 1), "amount"},
		{ident("s.t", 1), "s.t"},
		{ident("My Col", 1), `"My Col"`},
		{str("it's", 1), "'it''s'"},
		{Value{Kind: Number, Text: "1.5"}, "1.5"},
		{Value{Kind: List, Text: "('a', 'b')"}, "('a', 'b')"},
	} {
		if got := tt.v.SQL(); got != tt.want {
			t.Errorf("%+v: got %s, want %s", tt.v, got, tt.want)
		}
	}
}
