package models

import (
	"strings"
	"testing"
)

// The lexer skips string literals, quoted identifiers and comments: what
// they hold is neither a statement separator nor a macro.
func TestLexSQL(t *testing.T) {
	kinds := map[sqlTok]string{tokWord: "w", tokString: "s", tokQuoted: "q", tokComment: "c", tokMacro: "m", tokSemi: ";", tokOther: "o"}
	for _, c := range []struct{ sql, want string }{
		{"SELECT 1", "w:SELECT o:1"},
		{"select 'it''s; @x' from t", "w:select s:'it''s; @x' w:from w:t"},
		{`select "a;""@b" from t`, `w:select q:"a;""@b" w:from w:t`},
		{"-- @x; 'y\nselect", "c:-- @x; 'y w:select"},
		{"/* @x; \n 'y */select", "c:/* @x; \n 'y */ w:select"},
		{"select /* a /* b */ 1", "w:select c:/* a /* b */ o:1"},
		{"where ts >= @start_ts and ts < @end_ts;", "w:where w:ts o:> o:= m:start_ts w:and w:ts o:< m:end_ts ;:;"},
		{"select a@b, @ 1, @1", "w:select w:a m:b o:, o:@ o:1 o:, o:@ o:1"},
		{"select a-b/c--x", "w:select w:a o:- w:b o:/ w:c c:--x"},
		{"select ''", "w:select s:''"},
		{"", ""},
	} {
		toks, err := lexSQL(c.sql)
		if err != nil {
			t.Errorf("%q: %v", c.sql, err)
			continue
		}
		var got []string
		for _, tk := range toks {
			if c.sql[tk.pos:tk.pos+len(tk.text)] != tk.text && tk.kind != tokMacro {
				t.Errorf("%q: token %q not at %d", c.sql, tk.text, tk.pos)
			}
			got = append(got, kinds[tk.kind]+":"+tk.text)
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.sql, g, c.want)
		}
	}
	for _, c := range []struct{ sql, want string }{
		{"select 'a", "has an unterminated string literal at line 1, column 8"},
		{"select 'a''", "has an unterminated string literal at line 1, column 8"},
		{"select\n  \"a", "has an unterminated quoted identifier at line 2, column 3"},
		{"select /* a", "has an unterminated /* comment at line 1, column 8"},
		{"select /* a *", "has an unterminated /* comment at line 1, column 8"},
		{`select 'it\'s'`, "has an unterminated string literal at line 1, column 14"},
	} {
		if _, err := lexSQL(c.sql); err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v, want %q", c.sql, err, c.want)
		}
	}
}

func TestCheckSQL(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"SELECT * FROM events WHERE ts >= @start_ts AND ts < @end_ts", ""},
		{"  -- daily sessions\n  /* v2 */ WiTh s AS (SELECT 1) SELECT * FROM s", ""},
		{"select ';' as semi, '@foo' as at, \"@bar;\" from t -- ; @baz", ""},
		{"select 1\n", ""},
		// Statements are DuckDB's parser's to count (package sqlcheck).
		{"select 1;", ""},
		{"select 1 -- only a comment after;\n;", ""},
		{"SELECT @START_TS", "uses the macro @START_TS at line 1, column 8: only @start_ts and @end_ts are defined"},
		{"SELECT @start_tsx", "uses the macro @start_tsx at line 1, column 8: only @start_ts and @end_ts are defined"},
		{"SELECT @{start_ts}", ""}, // '@' not followed by a name is an operator, not a macro
		{"insert into t select 1", ""},
		{"select 'a", "has an unterminated string literal at line 1, column 8"},
		{"", "is empty"},
		{"\t\n ", "is empty"},
		{"select '\xff'", "is not valid UTF-8"},
		{"select\x00", "has a NUL byte at line 1, column 7"},
		{strings.Repeat(" ", MaxSQL-8) + "select 1", ""},
		{strings.Repeat(" ", MaxSQL-7) + "select 1", "is 65537 bytes: at most 65536"},
	} {
		err := checkSQL(c.sql)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%.40q: got %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestCheckTimeColumn(t *testing.T) {
	for _, c := range []struct {
		col string
		ok  bool
	}{
		{"ts", true}, {"_event_time2", true}, {"T", true}, {strings.Repeat("a", 63), true},
		{"", false}, {"2ts", false}, {"event time", false}, {"ts;", false}, {`"ts"`, false}, {"a.ts", false},
		{"été", false}, {strings.Repeat("a", 64), false},
	} {
		if err := checkTimeColumn(c.col); (err == nil) != c.ok {
			t.Errorf("%q: got %v, want ok=%t", c.col, err, c.ok)
		}
	}
}

// The lexer and the check never panic, and tokens lie inside the text in
// order.
func FuzzCheckSQL(f *testing.F) {
	for _, s := range []string{"SELECT 1", "select 'a''b' -- c\n/* d */ \"e\" @start_ts;", "select 'a", "/*", "@", "--", "'", `"`, "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = checkSQL(s)
		toks, err := lexSQL(s)
		if err != nil {
			return
		}
		end := 0
		for _, tk := range toks {
			if tk.pos < end || tk.pos >= len(s) {
				t.Fatalf("token %+v out of order (after %d) in %q", tk, end, s)
			}
			end = tk.pos + 1
		}
	})
}
