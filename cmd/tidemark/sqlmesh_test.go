package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/sqlcheck"
	"github.com/tidemark/tidemark/sqlmesh/project"
)

// sqlmeshFixture is the SQLMesh project written for the tests.
const sqlmeshFixture = "../../testdata/sqlmesh"

// expectedRows is testdata/sqlmesh/expected.json: per model, the rows a
// correct run gives.
type expectedRows struct {
	Models map[string]struct {
		Columns []string `json:"columns"`
		OrderBy []string `json:"order_by"`
		Rows    [][]any  `json:"rows"`
	} `json:"models"`
}

// copyProject copies the fixture project to a directory of the test's.
func copyProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shop")
	if err := os.CopyFS(dir, os.DirFS(sqlmeshFixture)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editFile replaces old (which must be there) with new in dir's file.
func editFile(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q (%v)", file, old, err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// viewRows queries model's view in env prod (its columns as text, in
// order), as CSV records without the header.
func viewRows(t *testing.T, nats, model string, cols, order []string) ([][]string, error) {
	t.Helper()
	schema, name, _ := strings.Cut(model, ".")
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "CAST(" + c + " AS VARCHAR) AS " + c
	}
	q := fmt.Sprintf("SELECT %s FROM %s__prod.%s ORDER BY %s", strings.Join(sel, ", "), schema, name, strings.Join(order, ", "))
	out, stderr, code := runCLI(t, "query", q, "--nats-url", nats, "-o", "csv")
	if code != 0 {
		return nil, fmt.Errorf("query %s: exit %d %s", q, code, stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("query %s: %v %q", q, err, out)
	}
	return recs[1:], nil
}

// checkRows waits until model's rows in prod are want (JSON values:
// numbers and strings), in order: the views follow a promotion by the
// syncer, a moment after it is accepted.
func checkRows(t *testing.T, nats, model string, cols, order []string, want [][]any) {
	t.Helper()
	w := make([][]string, len(want))
	for i, r := range want {
		w[i] = make([]string, len(r))
		for j, v := range r {
			w[i][j] = fmt.Sprint(v)
		}
	}
	var got [][]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if got, err = viewRows(t, nats, model, cols, order); err == nil && fmt.Sprint(got) == fmt.Sprint(w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in prod (%v):\n got %v\nwant %v", model, err, got, w)
		}
		time.Sleep(50 * time.Millisecond) // re-querying until the views are swapped, bounded by the deadline
	}
}

// TestSQLMeshProjectForReal: a SQLMesh project as it is (testdata/sqlmesh:
// a seed, an incremental model of monthly batches, a FULL model, a VIEW
// in another schema, built-in and file audits), applied to a real serve
// with the built-in worker on DuckDB, planned without --set, promoted:
// every model's rows in prod are the ones SQLMesh gives
// (testdata/sqlmesh/expected.json), verify finds no difference. An edit
// of the seed's CSV is a new version of the seed, and plan without --set
// plans it (its downstream models derived); an unchanged project plans
// nothing; a broken model file is refused naming its file and line.
func TestSQLMeshProjectForReal(t *testing.T) {
	var want expectedRows
	b, err := os.ReadFile(filepath.Join(sqlmeshFixture, "expected.json"))
	if err != nil || json.Unmarshal(b, &want) != nil || len(want.Models) != 4 {
		t.Fatalf("expected.json: %v", err)
	}
	dir := copyProject(t)
	s := startServe(t, "--builtin-worker")

	out, stderr, code := runCLI(t, "apply", "-f", dir, "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "4 model(s), 4 registered, 0 unchanged") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "config.yaml") || !strings.Contains(stderr, "gateways") {
		t.Errorf("apply's notes do not report config.yaml's ignored keys: %s", stderr)
	}
	for _, m := range []string{"shop.raw_orders@d", "shop.orders@d", "shop.daily_revenue@d", "reporting.customer_totals@d"} {
		if !strings.Contains(out, "registered "+m) {
			t.Errorf("apply did not register %s…: %s", m, out)
		}
	}
	promote := func(plan string) {
		t.Helper()
		if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--id", plan, "--nats-url", s.nats, "--wait", "2m"); code != 0 {
			t.Fatalf("plan %s: exit %d\n%s\n%s", plan, code, out, stderr)
		}
		eventually(t, "plan "+plan+" is promoted", time.Minute, func() bool {
			out, _, code := runCLI(t, "promote", plan, "--nats-url", s.nats)
			return code == 0 && strings.Contains(out, "ACCEPTED")
		})
	}
	promote("p1")
	for _, model := range []string{"shop.raw_orders", "shop.orders", "shop.daily_revenue", "reporting.customer_totals"} {
		m := want.Models[model]
		checkRows(t, s.nats, model, m.Columns, m.OrderBy, m.Rows)
	}
	if out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats); code != 0 {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, stderr)
	}

	// Unchanged: nothing registered, nothing planned.
	out, stderr, code = runCLI(t, "apply", "-f", dir, "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "4 model(s), 0 registered, 4 unchanged") {
		t.Fatalf("apply again: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = runCLI(t, "plan", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "nothing changed") {
		t.Fatalf("plan of an unchanged project: exit %d\n%s\n%s", code, out, stderr)
	}

	// A new order in the seed: a new version of the seed, and every model
	// downstream of it derived by the plan.
	editFile(t, dir, "seeds/raw_orders.csv", "7,12,40,paid,2024-01-04 10:00:00", "7,12,40,paid,2024-01-04 10:00:00\n8,10,3,paid,2024-01-04 11:00:00")
	out, stderr, code = runCLI(t, "apply", "-f", dir, "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "4 model(s), 1 registered, 3 unchanged") || !strings.Contains(out, "registered shop.raw_orders@d") {
		t.Fatalf("apply of the new seed: exit %d\n%s\n%s", code, out, stderr)
	}
	promote("p2")
	checkRows(t, s.nats, "reporting.customer_totals", []string{"customer_id", "orders", "spent"}, []string{"customer_id"},
		[][]any{{10, 3, 24}, {11, 1, 7}, {12, 2, 45}})
	checkRows(t, s.nats, "shop.daily_revenue", []string{"order_date", "orders", "revenue"}, []string{"order_date"},
		[][]any{{"2024-01-01", 2, 19}, {"2024-01-02", 2, 35}, {"2024-01-03", 1, 9}, {"2024-01-04", 2, 43}})
	if out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats); code != 0 {
		t.Fatalf("verify after p2: exit %d\n%s\n%s", code, out, stderr)
	}

	// A macro SQLMesh does not predefine: refused at apply, naming the
	// file and its line; nothing registered.
	editFile(t, dir, "models/orders.sql", "WHERE ts BETWEEN @start_ts AND @end_ts", "WHERE ts BETWEEN @start_ts AND @end_ts AND @my_macro")
	out, stderr, code = runCLI(t, "apply", "-f", dir, "--nats-url", s.nats)
	if code != 2 || !strings.Contains(stderr, "orders.sql:31") || !strings.Contains(stderr, "@my_macro") {
		t.Fatalf("apply of an unknown macro: exit %d, want 2 naming orders.sql:31 and @my_macro\n%s\n%s", code, out, stderr)
	}
}

// TestCheckProjectPlacesAudits: apply's local SQL check places an audit's
// refusal where the audit is: a built-in's at its call in the model file,
// a custom one's SQL at its line in the audit file, each naming the
// property audits.
func TestCheckProjectPlacesAudits(t *testing.T) {
	if !sqlcheck.Available() {
		t.Skip("no DuckDB parser in this build")
	}
	for _, c := range []struct{ file, old, new, want string }{
		{"models/orders.sql", "not_null(columns := [order_id, customer_id, ts])", "not_null(columns := [order_id, customr_id, ts])",
			filepath.Join("models", "orders.sql") + ":14: audits: "},
		{"audits/amounts.sql", "WHERE amount > @max_amount", "WHERE amout > @max_amount",
			filepath.Join("audits", "amounts.sql") + ":16: audits: "},
	} {
		dir := copyProject(t)
		editFile(t, dir, c.file, c.old, c.new)
		p, err := project.Load(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		err = checkProject(t.Context(), p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.file, err, c.want)
		}
	}
}
