package warehouse

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// diffTable creates snapshot table name with the given rows (id, ts
// offset in hours from day0, v, n) and lets the sandbox read it.
func diffTable(t *testing.T, w *Warehouse, name, extra string, rows ...string) {
	t.Helper()
	mustExec(t, w, "CREATE SCHEMA IF NOT EXISTS tidemark")
	mustExec(t, w, fmt.Sprintf(`CREATE TABLE tidemark.%s (id BIGINT, ts TIMESTAMP, v VARCHAR(400), n BIGINT%s)`, name, extra))
	for _, r := range rows {
		mustExec(t, w, fmt.Sprintf("INSERT INTO tidemark.%s (id, ts, v, n) VALUES %s", name, r))
	}
	if w.Engine() == "postgres" {
		mustExec(t, w, "GRANT USAGE ON SCHEMA tidemark TO "+SandboxRole)
		mustExec(t, w, "GRANT SELECT ON tidemark."+name+" TO "+SandboxRole)
	}
}

// hourTS is the SQL timestamp h hours after day0.
func hourTS(h int) string {
	return "TIMESTAMP '" + day0.Add(time.Duration(h)*time.Hour).Format("2006-01-02 15:04:05") + "'"
}

// TestDiffTables: rows only in each side (duplicates count: 3 copies
// against 1 are 2), a key whose
// values changed (per column: NULL against a value differs, NULL
// against NULL does not), rows outside the ranges left
// out, an hour equal on both sides, long values cut; without a grain only
// the counts.
func TestDiffTables(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		long := func(c string) string { return "'" + strings.Repeat(c, 300) + "'" }
		diffTable(t, w, "cand", "",
			"(1, "+hourTS(0)+", 'a', NULL)",
			"(2, "+hourTS(0)+", 'b', 5)",
			"(3, "+hourTS(1)+", 'c', 1)", "(3, "+hourTS(1)+", 'c', 1)", "(3, "+hourTS(1)+", 'c', 1)",
			"(4, "+hourTS(2)+", 'd', 1)",
			"(7, "+hourTS(3)+", "+long("x")+", 1)",
			"(10, "+hourTS(3)+", 'q', NULL)",
			"(8, "+hourTS(4)+", 'z', NULL)",
			"(6, "+hourTS(10)+", 'out', 1)")
		diffTable(t, w, "inc", ", extra BIGINT",
			"(1, "+hourTS(0)+", 'a', NULL)",
			"(2, "+hourTS(0)+", 'b', 6)",
			"(3, "+hourTS(1)+", 'c', 1)",
			"(5, "+hourTS(2)+", 'e', 1)",
			"(7, "+hourTS(3)+", "+long("y")+", 1)",
			"(10, "+hourTS(3)+", 'q', 4)",
			"(8, "+hourTS(4)+", 'z', NULL)",
			"(9, "+hourTS(11)+", 'out', 1)")
		ranges := []Range{{day0, day0.Add(5 * time.Hour)}}
		d, err := w.DiffTables(ctx, DiffSide{"cand", "ts"}, DiffSide{"inc", "ts"}, ranges, []string{"id"})
		if err != nil {
			t.Fatal(err)
		}
		if d.CandidateRows != 9 || d.IncumbentRows != 7 || d.OnlyInCandidate != 6 || d.OnlyInIncumbent != 4 {
			t.Fatalf("counts: %+v", d)
		}
		if fmt.Sprint(d.Columns, d.IncumbentOnlyColumns, d.CandidateOnlyColumns) != "[id ts v n] [extra] []" {
			t.Fatalf("columns: %v, only in the incumbent %v, only in the candidate %v", d.Columns, d.IncumbentOnlyColumns, d.CandidateOnlyColumns)
		}
		if d.Changed != 3 || fmt.Sprint(d.ChangedColumns) != "map[n:2 ts:0 v:1]" || fmt.Sprint(d.ValueColumns) != "[ts v n]" {
			t.Fatalf("changed: %d %v %v", d.Changed, d.ChangedColumns, d.ValueColumns)
		}
		if len(d.Samples) != 3 || fmt.Sprint(d.Samples[2].Key, d.Samples[2].Candidate[1:], d.Samples[2].Incumbent[1:]) != "[10] [q <nil>] [q 4]" {
			t.Fatalf("samples: %+v", d.Samples)
		}
		s0, s1 := d.Samples[0], d.Samples[1]
		if fmt.Sprint(s0.Key, s0.Candidate[1:], s0.Incumbent[1:]) != "[2] [b 5] [b 6]" {
			t.Fatalf("the first sample: %+v", s0)
		}
		cv, iv := fmt.Sprint(s1.Candidate[1]), fmt.Sprint(s1.Incumbent[1])
		if fmt.Sprint(s1.Key) != "[7]" || len(cv) != DiffValueBytes || !strings.HasPrefix(cv, "xxx") || !strings.HasSuffix(cv, "…") || !strings.HasPrefix(iv, "yyy") {
			t.Fatalf("the second sample: key %v, %q, %q", s1.Key, cv, iv)
		}
		// Without a grain: the same counts, no keyed part.
		d, err = w.DiffTables(ctx, DiffSide{"cand", "ts"}, DiffSide{"inc", "ts"}, ranges, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.OnlyInCandidate != 6 || d.OnlyInIncumbent != 4 || d.Changed != 0 || d.Samples != nil || d.Grain != nil {
			t.Fatalf("without a grain: %+v", d)
		}
		// The equal hours only: nothing differs; two ranges.
		d, err = w.DiffTables(ctx, DiffSide{"cand", "ts"}, DiffSide{"inc", "ts"}, []Range{{day0.Add(4 * time.Hour), day0.Add(5 * time.Hour)}, {day0.Add(20 * time.Hour), day0.Add(21 * time.Hour)}}, []string{"id"})
		if err != nil || !d.Empty() || d.CandidateRows != 1 || d.IncumbentRows != 1 {
			t.Fatalf("equal hours: %+v, %v", d, err)
		}
		// A grain column one side lacks: counts, and a note.
		d, err = w.DiffTables(ctx, DiffSide{"inc", "ts"}, DiffSide{"cand", "ts"}, ranges, []string{"extra"})
		if err != nil || d.Grain != nil || !strings.Contains(d.Note, `"extra"`) || d.OnlyInCandidate != 4 || d.OnlyInIncumbent != 6 {
			t.Fatalf("a grain column missing: %+v, %v", d, err)
		}
		// A column named as the diff's own: refused, not misread.
		diffTable(t, w, "clash", ", tidemark_hash BIGINT")
		if _, err := w.DiffTables(ctx, DiffSide{"clash", "ts"}, DiffSide{"clash", "ts"}, ranges, nil); err == nil || !strings.Contains(err.Error(), `"tidemark_hash"`) {
			t.Fatalf("a column named tidemark_hash: %v", err)
		}
		if _, err := w.DiffTables(ctx, DiffSide{"cand", "ts"}, DiffSide{"nope", "ts"}, ranges, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("a missing table: %v", err)
		}
	})
}

// A grain column the model's SQL names unquoted in mixed case (userId)
// matches rows on both engines: Postgres folds it to lower case in the
// tables, and the diff finds it there.
func TestDiffMixedCaseGrain(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		diffTable(t, w, "cand_mc", ", userId BIGINT", "(1, "+hourTS(0)+", 'a', 1)", "(2, "+hourTS(0)+", 'b', 5)")
		diffTable(t, w, "inc_mc", ", userId BIGINT", "(1, "+hourTS(0)+", 'a', 1)", "(2, "+hourTS(0)+", 'b', 6)")
		mustExec(t, w, "UPDATE tidemark.cand_mc SET userId = id")
		mustExec(t, w, "UPDATE tidemark.inc_mc SET userId = id")
		d, err := w.DiffTables(t.Context(), DiffSide{"cand_mc", "ts"}, DiffSide{"inc_mc", "ts"}, []Range{{day0, day0.Add(time.Hour)}}, []string{"userId"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Note != "" || len(d.Grain) != 1 || d.Changed != 1 || d.ChangedColumns["n"] != 1 {
			t.Fatalf("grain %v, note %q, changed %d %v", d.Grain, d.Note, d.Changed, d.ChangedColumns)
		}
	})
}
