package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/warehouse"
)

// One private Postgres server for this package's tests (internal/pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }

// warehouseDir holds the scenario files that need a warehouse (their
// models carry sql:, their steps expect verify).
const warehouseDir = "../testdata/scenarios/warehouse"

// openWarehouse opens a fresh warehouse of the backend ("duckdb" or
// "postgres"), or skips.
func openWarehouse(t *testing.T, backend string) *warehouse.Warehouse {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "warehouse.duckdb")
	if backend == "postgres" {
		dsn = pgtest.DSN(t)
	}
	wh, err := warehouse.Open(t.Context(), dsn, warehouse.Options{})
	if errors.Is(err, warehouse.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}

// Every warehouse scenario passes on DuckDB and on Postgres, and verifies
// something. forward-only-logic-change.yaml verifies prod after a
// forward-only version with new logic computed new hours: its last step's
// verify held v1's history to v1's query and the new hours to v2's.
func TestWarehouseScenarioFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(warehouseDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, path := range files {
		for _, backend := range []string{"duckdb", "postgres"} {
			t.Run(filepath.Base(path)+"/"+backend, func(t *testing.T) {
				f, err := Load(path)
				if err != nil {
					t.Fatal(err)
				}
				verifies := 0
				for _, st := range f.Steps {
					if st.Expect != nil && st.Expect.VerifyDiffs != nil {
						verifies++
					}
				}
				if verifies == 0 {
					t.Fatal("the file expects no verify")
				}
				res, err := Run(t.Context(), f, Options{Warehouse: openWarehouse(t, backend)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Failed != 0 || res.Expectations == 0 {
					t.Fatalf("failed %d of %d: %v", res.Failed, res.Expectations, res.Failures)
				}
				if filepath.Base(path) != "forward-only-logic-change.yaml" {
					return
				}
				d := res.Steps[len(res.Steps)-1].Verify["hourly_views"]
				if d.Writers["hourly_views@v1"] != 3 || d.Writers["hourly_views@v2"] != 3 || d.Unrecorded != 0 {
					t.Fatalf("the last step's verify of hourly_views: %+v, want 3 writes by v1 (its 30-hour backfill in one batch, 2 ticks) and 3 by v2", d)
				}
			})
		}
	}
}

// verify: {diffs: N} fails without a warehouse (nothing can be checked),
// and with one when the count differs; a malformed key makes the file
// invalid, naming the field.
func TestVerifyExpectation(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(warehouseDir, "forward-only-logic-change.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	f, err := Parse("fo.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, f)
	if res.Failed != 5 || res.Failures[0].Key != "verify.diffs" || res.Failures[0].Got != "<no warehouse: run with --warehouse>" {
		t.Fatalf("without a warehouse: %+v", res.Failures)
	}

	wrong, err := Parse("wrong.yaml", []byte(strings.Replace(text, "incumbent: {hourly_views: v2}, verify: {diffs: 0}", "incumbent: {hourly_views: v2}, verify: {diffs: 2}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	res, err = Run(t.Context(), wrong, Options{Warehouse: openWarehouse(t, "duckdb")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || res.Failures[0].Step != 4 || res.Failures[0].Key != "verify.diffs" ||
		res.Failures[0].Got != "0 (events: 0 only in the view, 0 only in the recompute; hourly_views: 0 only in the view, 0 only in the recompute)" {
		t.Fatalf("a wrong count: %+v", res.Failures)
	}

	for _, c := range []struct{ name, with, want string }{
		{"negative", "verify: {diffs: -1}", "bad.yaml: step 1.expect.verify.diffs: must be >= 0"},
		{"missing", "verify: {}", "bad.yaml: step 1.expect.verify.diffs: is required"},
		{"other key", "verify: {diffs: 0, rows: 1}", "bad.yaml: step 1.expect.verify"},
		{"not a map", "verify: 0", "bad.yaml: step 1.expect.verify"},
	} {
		_, err := Parse("bad.yaml", []byte(strings.Replace(text, "{outcome: accepted, verify: {diffs: 0}}", "{outcome: accepted, "+c.with+"}", 1)))
		if !errors.Is(err, modelfile.ErrInvalid) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want prefix %q", c.name, err, c.want)
		}
	}
}
