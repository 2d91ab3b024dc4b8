package warehouse

import (
	"strings"
	"testing"
	"time"
)

// views is a model of one row per page view: 206 rows a day (one every
// 7 minutes), 13 users, the status NULL for user 3 (16 rows of day 0),
// amounts from 0 to 24.75.
func views(table string) Model {
	return Model{
		Name: "views", Table: table, TimeColumn: "hour",
		SQL: `SELECT CAST(date_trunc('hour', ts) AS TIMESTAMP) AS hour, ts, user_id,
			CASE WHEN user_id = 3 THEN NULL ELSE 'paid' END AS status, amount
			FROM raw.page_views WHERE ts >= @start_ts AND ts < @end_ts`,
	}
}

// auditCase is an audit and the result it must give over day 0.
type auditCase struct {
	name   string
	audit  Audit
	passed bool
	count  int64
	// errHas, when set: the audit cannot run, and its error says this.
	errHas string
}

func runAuditCases(t *testing.T, w *Warehouse, m Model, r Range, cases []auditCase) {
	t.Helper()
	audits := make([]Audit, len(cases))
	for i, c := range cases {
		audits[i] = c.audit
	}
	res := w.Audit(t.Context(), m, audits, r.Start, r.End)
	if len(res) != len(cases) {
		t.Fatalf("%d results for %d audits", len(res), len(cases))
	}
	for i, c := range cases {
		got := res[i]
		want := c.audit.Name
		if want == "" {
			want = c.audit.Kind
		}
		if got.Name != want {
			t.Errorf("%s: named %q, want %q", c.name, got.Name, want)
		}
		if c.errHas != "" {
			if got.Passed || !strings.Contains(got.Error, c.errHas) {
				t.Errorf("%s: %+v, want a failed result whose error says %q", c.name, got, c.errHas)
			}
			if len(got.Error) > AuditErrorBytes {
				t.Errorf("%s: error of %d bytes", c.name, len(got.Error))
			}
			continue
		}
		if got.Error != "" || got.Passed != c.passed || got.Count != c.count {
			t.Errorf("%s: passed %v count %d error %q, want passed %v count %d", c.name, got.Passed, got.Count, got.Error, c.passed, c.count)
			continue
		}
		if c.audit.Kind == AuditNumberOfRows || c.count == 0 {
			if len(got.Sample) != 0 {
				t.Errorf("%s: a sample %v", c.name, got.Sample)
			}
			continue
		}
		if want := min(int(c.count), AuditSampleRows); len(got.Sample) != want {
			t.Errorf("%s: %d sample rows, want %d", c.name, len(got.Sample), want)
		}
		for _, row := range got.Sample {
			if len(row) != len(got.Columns) {
				t.Errorf("%s: sample row %v for columns %v", c.name, row, got.Columns)
			}
		}
	}
}

// Every built-in audit and a custom one, on both engines, over one day
// of a table holding two: each counts its violations in that day only.
func TestAuditBuiltins(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := views("views__a")
		write(t, w, m, Range{day(0), day(2)})
		d0 := Range{day(0), day(1)}
		runAuditCases(t, w, m, d0, []auditCase{
			{"not_null passes", Audit{Kind: AuditNotNull, Columns: []string{"hour", "user_id"}}, true, 0, ""},
			{"not_null finds the NULL statuses", Audit{Name: "status_set", Kind: AuditNotNull, Columns: []string{"hour", "status"}}, false, 16, ""},
			{"unique_values passes", Audit{Kind: AuditUniqueValues, Columns: []string{"ts"}}, true, 0, ""},
			// Each column on its own: 206 rows of 13 users repeat 193 times.
			{"unique_values per column", Audit{Name: "uniq2", Kind: AuditUniqueValues, Columns: []string{"ts", "user_id"}}, false, 193, ""},
			{"number_of_rows passes", Audit{Kind: AuditNumberOfRows, Threshold: 206}, true, 206, ""},
			{"number_of_rows fails", Audit{Name: "rows207", Kind: AuditNumberOfRows, Threshold: 207}, false, 206, ""},
			{"number_of_rows 0 passes", Audit{Name: "rows0", Kind: AuditNumberOfRows}, true, 206, ""},
			// NULL passes, as in SQLMesh.
			{"accepted_values NULL passes", Audit{Kind: AuditAcceptedValues, Column: "status", IsIn: []string{"paid"}}, true, 0, ""},
			// An integer compared as text: user 12 is not accepted (15 rows).
			{"accepted_values as text", Audit{Name: "users", Kind: AuditAcceptedValues, Column: "user_id", IsIn: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}}, false, 15, ""},
			// Compared as numbers: users 10, 11, 12 are above 9 (46 rows);
			// as text, "10" < "9" would find none.
			{"accepted_range numeric", Audit{Name: "user_range", Kind: AuditAcceptedRange, Column: "user_id", Min: "0", Max: "9"}, false, 46, ""},
			{"accepted_range decimal", Audit{Name: "amount_range", Kind: AuditAcceptedRange, Column: "amount", Max: "24"}, false, 6, ""},
			{"accepted_range passes", Audit{Name: "amount_ok", Kind: AuditAcceptedRange, Column: "amount", Min: "0", Max: "24.75"}, true, 0, ""},
			// Before 06:00: i*7 < 360, 52 rows.
			{"accepted_range timestamp", Audit{Name: "after6", Kind: AuditAcceptedRange, Column: "hour", Min: "2026-01-01 06:00:00"}, false, 52, ""},
			{"accepted_range bad literal", Audit{Name: "bad_min", Kind: AuditAcceptedRange, Column: "user_id", Min: "zero"}, false, 0, "zero"},
			{"custom", Audit{Name: "big", Kind: AuditCustom, SQL: "SELECT * FROM @this_model WHERE amount > 20 AND hour >= @start_ts -- big ones"}, false, 38, ""},
			{"custom bounds", Audit{Name: "outside", Kind: AuditCustom, SQL: "SELECT hour FROM @THIS_MODEL WHERE hour < @start_ts OR hour >= @end_ts"}, true, 0, ""},
			{"custom with", Audit{Name: "with", Kind: AuditCustom, SQL: "WITH t AS (SELECT user_id, count(*) AS n FROM @this_model GROUP BY 1) SELECT * FROM t WHERE n > 15"}, false, 11, ""},
			{"custom unknown column", Audit{Name: "typo", Kind: AuditCustom, SQL: "SELECT * FROM @this_model WHERE amout > 1"}, false, 0, "amout"},
			{"custom unknown macro", Audit{Name: "macro", Kind: AuditCustom, SQL: "SELECT * FROM @this_model WHERE hour > @now"}, false, 0, "@now"},
			{"unknown kind", Audit{Name: "what", Kind: "not_a_kind"}, false, 0, "not_a_kind"},
		})
		// Day 1 alone: the same table, the other day's rows.
		runAuditCases(t, w, m, Range{day(1), day(2)}, []auditCase{
			{"number_of_rows of day 1", Audit{Kind: AuditNumberOfRows, Threshold: 1}, true, 206, ""},
		})
	})
}

// A sample shows the violating rows' values as text: NULL as AuditNull,
// times in RFC 3339, each value cut to AuditValueBytes.
func TestAuditSample(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := views("views__s")
		write(t, w, m, Range{day(0), day(1)})
		res := w.Audit(t.Context(), m, []Audit{
			{Kind: AuditNotNull, Columns: []string{"status"}},
			{Name: "long", Kind: AuditCustom, SQL: "SELECT repeat('é', 150) AS s, user_id FROM @this_model WHERE user_id = 5"},
		}, day(0), day(1))
		nn := res[0]
		if strings.Join(nn.Columns, ",") != "hour,ts,user_id,status,amount" {
			t.Fatalf("not_null's sample columns: %v", nn.Columns)
		}
		first := nn.Sample[0]
		if first[3] != AuditNull || first[2] != "3" || first[1] != "2026-01-01T00:21:00Z" || first[0] != "2026-01-01T00:00:00Z" {
			t.Fatalf("not_null's first sample row: %q", first)
		}
		long := res[1]
		if long.Passed || long.Count != 16 || len(long.Sample) != AuditSampleRows {
			t.Fatalf("the long values' audit: %+v", long)
		}
		if v := long.Sample[0][0]; len(v) != AuditValueBytes || v != strings.Repeat("é", AuditValueBytes/2) {
			t.Fatalf("a value of %d bytes: %q", len(v), v)
		}
	})
}

// A hostile custom audit changes nothing and reads nothing it may not:
// a statement smuggled after it does not run, a file or the server's
// state is out of the sandbox's reach, and one that runs forever is
// cancelled at the model's timeout. Each is a failed result; the
// warehouse goes on auditing.
func TestAuditSandboxed(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := views("views__h")
		m.Timeout = 500 * time.Millisecond
		n := write(t, w, m, Range{day(0), day(1)})
		several := "multiple commands" // Postgres's refusal of several statements
		if w.Engine() == "duckdb" {
			several = "multi-statement"
		}
		cases := []auditCase{
			{"delete", Audit{Name: "del", Kind: AuditCustom, SQL: `DELETE FROM tidemark."views__h"`}, false, 0, "syntax error"},
			{"smuggled", Audit{Name: "smuggle", Kind: AuditCustom, SQL: "SELECT 1 AS x\n) tidemark_violations; DELETE FROM tidemark.\"views__h\"; SELECT * FROM (SELECT 1 AS x"}, false, 0, several},
			{"insert", Audit{Name: "ins", Kind: AuditCustom, SQL: `SELECT * FROM @this_model) x; INSERT INTO tidemark."views__h" SELECT * FROM tidemark."views__h"; SELECT * FROM (SELECT 1`}, false, 0, several},
		}
		if w.Engine() == "duckdb" {
			cases = append(cases,
				auditCase{"read_text", Audit{Name: "file", Kind: AuditCustom, SQL: "SELECT * FROM read_text('/etc/passwd')"}, false, 0, "file system operations are disabled"},
				auditCase{"copy", Audit{Name: "copy", Kind: AuditCustom, SQL: "SELECT 1) x; COPY (SELECT 42) TO '" + t.TempDir() + "/out.csv'; SELECT * FROM (SELECT 1"}, false, 0, several},
				auditCase{"forever", Audit{Name: "forever", Kind: AuditCustom, SQL: "SELECT count(*) AS n FROM range(100000000) a, range(100000000) b"}, false, 0, "timeout"},
			)
		} else {
			cases = append(cases,
				auditCase{"pg_read_file", Audit{Name: "file", Kind: AuditCustom, SQL: "SELECT pg_read_file('/etc/passwd') AS x"}, false, 0, "permission denied"},
				auditCase{"set_config", Audit{Name: "role", Kind: AuditCustom, SQL: "SELECT set_config('role', 'postgres', true) AS r, pg_read_file('/etc/passwd') AS x"}, false, 0, "permission denied"},
				auditCase{"lo_import", Audit{Name: "write_fn", Kind: AuditCustom, SQL: "SELECT lo_import('/etc/passwd') AS x"}, false, 0, "permission denied"},
				auditCase{"forever", Audit{Name: "forever", Kind: AuditCustom, SQL: "SELECT pg_sleep(60) AS x"}, false, 0, "timeout"},
			)
		}
		runAuditCases(t, w, m, Range{day(0), day(1)}, cases)
		if got := scalar(t, w, `SELECT count(*) FROM tidemark."views__h"`); got != n {
			t.Fatalf("the audited table holds %d rows, want %d", got, n)
		}
		runAuditCases(t, w, m, Range{day(0), day(1)}, []auditCase{
			{"after", Audit{Kind: AuditNumberOfRows, Threshold: 1}, true, n, ""},
		})
	})
}

// A column the model's SQL names unquoted in mixed case (userId) is
// audited by that name on both engines: Postgres folds it to lower case
// in the table (sqlcheck, on DuckDB, checked it as written), and the
// audit finds it there.
func TestAuditMixedCaseColumns(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := Model{Name: "views", Table: "views__mc", TimeColumn: "hour",
			SQL: `SELECT CAST(date_trunc('hour', ts) AS TIMESTAMP) AS hour, user_id AS userId,
				CASE WHEN user_id = 3 THEN NULL ELSE 'paid' END AS Status
				FROM raw.page_views WHERE ts >= @start_ts AND ts < @end_ts`}
		write(t, w, m, Range{day(0), day(1)})
		runAuditCases(t, w, m, Range{day(0), day(1)}, []auditCase{
			{"not_null", Audit{Kind: AuditNotNull, Columns: []string{"hour", "userId"}}, true, 0, ""},
			{"not_null finds the NULL statuses", Audit{Name: "status_set", Kind: AuditNotNull, Columns: []string{"Status"}}, false, 16, ""},
			{"unique_values", Audit{Kind: AuditUniqueValues, Columns: []string{"userId"}}, false, 193, ""},
			{"accepted_values", Audit{Kind: AuditAcceptedValues, Column: "Status", IsIn: []string{"paid"}}, true, 0, ""},
			{"accepted_range", Audit{Kind: AuditAcceptedRange, Column: "userId", Min: "0", Max: "12"}, true, 0, ""},
			{"no such column", Audit{Name: "typo", Kind: AuditNotNull, Columns: []string{"userID2"}}, false, 0, "userID2"},
		})
	})
}
