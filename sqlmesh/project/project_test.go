package project

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/sqlcheck"
)

const fixture = "../../testdata/sqlmesh"

// needParser skips a test that reads SQL without DuckDB's parser (a build
// without cgo refuses every SQL model).
func needParser(t *testing.T) {
	t.Helper()
	if !sqlcheck.Available() {
		t.Skip("no DuckDB parser in this build (cgo off)")
	}
}

func load(t *testing.T, path string) *Project {
	t.Helper()
	p, err := Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// copyFixture copies the fixture project into a temporary directory.
func copyFixture(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "project")
	if err := os.CopyFS(dst, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces old (which must be there) with new in a file of dir.
func edit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func versions(p *Project) map[string]string {
	out := map[string]string{}
	for _, m := range p.Models {
		out[m.Register.Model] = m.Register.Version
	}
	return out
}

// TestLoadFixture: every registration of the fixture project, field by
// field: kinds, schedule from model_defaults, audits mapped (SQLMesh's
// number_of_rows threshold 0 is tidemark's 1; a custom audit's arguments
// and defaults substituted; blocking false), depends_on inferred and the
// qualified references rewritten, seed content read, content versions,
// dependency order, and the notes.
func TestLoadFixture(t *testing.T) {
	needParser(t)
	p := load(t, fixture)
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	csv, err := os.ReadFile(filepath.Join(fixture, "seeds", "raw_orders.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []commands.RegisterSnapshot{{
		Model: "shop.raw_orders", Cron: "@daily", Start: day, SnapshotKind: events.Seed,
		Grain: []string{"order_id"}, Seed: string(csv), Macros: models.MacrosSQLMesh,
	}, {
		Model: "shop.orders", Cron: "@daily", Start: day, SnapshotKind: events.Incremental,
		DependsOn: []string{"shop.raw_orders"}, TimeColumn: "ts", BatchSize: 31,
		SQL: "-- SQLMesh's @start_ts and @end_ts: the day's first and last instants.\n" +
			"SELECT\n  order_id,\n  customer_id,\n  amount,\n  status,\n  ts\n" +
			"FROM \"shop.raw_orders\" AS \"raw_orders\"\nWHERE ts BETWEEN @start_ts AND @end_ts",
		Audits: []models.Audit{
			{Name: "not_null", Kind: models.AuditNotNull, Columns: []string{"order_id", "customer_id", "ts"}},
			{Name: "unique_values", Kind: models.AuditUniqueValues, Columns: []string{"order_id"}},
			{Name: "accepted_values", Kind: models.AuditAcceptedValues, Column: "status", IsIn: []string{"new", "paid", "refunded"}},
			{Name: "assert_positive_amount", Kind: models.AuditCustom, SQL: "SELECT *\nFROM @this_model\nWHERE amount <= 0"},
			{Name: "assert_max_amount", Kind: models.AuditCustom, SQL: "SELECT *\nFROM @this_model\nWHERE amount > 1000", NonBlocking: true},
		},
		Grain: []string{"order_id"}, Macros: models.MacrosSQLMesh,
	}, {
		Model: "reporting.customer_totals", Cron: "@daily", Start: day, SnapshotKind: events.View,
		DependsOn: []string{"shop.orders"},
		SQL: "SELECT\n  o.customer_id,\n  count(*) AS orders,\n  sum(o.amount) AS spent\n" +
			"FROM \"shop.orders\" AS o\nWHERE o.status = 'paid'\nGROUP BY o.customer_id",
		Grain: []string{"customer_id"}, Macros: models.MacrosSQLMesh,
	}, {
		Model: "shop.daily_revenue", Cron: "@daily", Start: day, SnapshotKind: events.Full,
		DependsOn: []string{"shop.orders"},
		SQL: "WITH kept AS (\n  SELECT * FROM \"shop.orders\" AS \"orders\" WHERE status <> 'refunded' -- a CTE is no model\n)\n" +
			"SELECT\n  CAST(ts AS DATE) AS order_date,\n  count(*) AS orders,\n  sum(amount) AS revenue\nFROM kept\nGROUP BY 1",
		Audits: []models.Audit{
			{Name: "number_of_rows", Kind: models.AuditNumberOfRows, Threshold: 1},
			{Name: "accepted_range", Kind: models.AuditAcceptedRange, Column: "revenue", Min: "0"},
		},
		Grain: []string{"order_date"}, Macros: models.MacrosSQLMesh,
	}}
	if len(p.Models) != len(want) {
		t.Fatalf("%d models, want %d", len(p.Models), len(want))
	}
	for i, m := range p.Models {
		got := m.Register
		if !strings.HasPrefix(got.Version, "d") || got.Version != modelfile.ContentVersion(got) {
			t.Errorf("%s: version %q is not the content version %q", got.Model, got.Version, modelfile.ContentVersion(got))
		}
		got.Version = ""
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("models[%d]:\ngot  %+v\nwant %+v", i, got, want[i])
		}
	}
	orders := p.Models[1]
	if orders.File != filepath.Join(fixture, "models", "orders.sql") || orders.Line != 4 || orders.QueryLine != 23 ||
		orders.Owner != "shop team" || orders.Description != "The orders of each day" {
		t.Errorf("orders: %+v", orders)
	}
	if seed := p.Models[0]; seed.SeedFile != filepath.Join(fixture, "models", "..", "seeds", "raw_orders.csv") || len(seed.Columns) != 5 || seed.QueryLine != 0 {
		t.Errorf("seed: file %s, columns %v, query line %d", seed.SeedFile, seed.Columns, seed.QueryLine)
	}
	var notes []string
	for _, n := range p.Notes {
		notes = append(notes, strings.TrimPrefix(n.String(), fixture+"/"))
	}
	wantNotes := []string{
		"config.yaml:4: gateways: ignored: tidemark reads only model_defaults (start, cron, dialect, interval_unit, owner)",
		"config.yaml:9: default_gateway: ignored: tidemark reads only model_defaults (start, cron, dialect, interval_unit, owner)",
		"models/orders.sql:11: owner: kept, but no part of the version (changing it alone registers nothing new)",
		"models/orders.sql:12: description: kept, but no part of the version (changing it alone registers nothing new)",
		"models/orders.sql:20: tags: not read by tidemark: no part of the version",
		"models/raw_orders.sql:8: columns: kept, but no part of the version (changing it alone registers nothing new)",
	}
	if !reflect.DeepEqual(notes, wantNotes) {
		t.Errorf("notes:\n%s\nwant\n%s", strings.Join(notes, "\n"), strings.Join(wantNotes, "\n"))
	}
}

// TestVersions: a version is the content's: stable across loads and
// copies, changed by an edit of the model's definition or of its seed's
// CSV (and only that model's), unchanged by what is no part of it.
func TestVersions(t *testing.T) {
	needParser(t)
	base := versions(load(t, fixture))
	if again := versions(load(t, fixture)); !reflect.DeepEqual(again, base) {
		t.Fatalf("two loads: %v and %v", base, again)
	}
	if moved := versions(load(t, copyFixture(t))); !reflect.DeepEqual(moved, base) {
		t.Fatalf("a copy elsewhere: %v, want %v", moved, base)
	}
	for _, tt := range []struct {
		name, file, old, new string
		changed              string // "" none
	}{
		{"the SQL", "models/daily_revenue.sql", "count(*) AS orders", "count(1) AS orders", "shop.daily_revenue"},
		{"the CSV", "seeds/raw_orders.csv", "7,12,40,paid", "7,12,41,paid", "shop.raw_orders"},
		{"a kind setting", "models/orders.sql", "batch_size 31", "batch_size 30", "shop.orders"},
		{"an audit file", "audits/amounts.sql", "WHERE amount > @max_amount", "WHERE amount >= @max_amount", "shop.orders"},
		{"the config's start", "config.yaml", "start: 2024-01-01", "start: 2024-01-02", "*"},
		{"a description", "models/orders.sql", "'The orders of each day'", "'Orders'", ""},
		{"a comment in the block", "models/orders.sql", "-- a month of days per batch", "-- a month", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyFixture(t)
			edit(t, dir, tt.file, tt.old, tt.new)
			got := versions(load(t, dir))
			for m, v := range base {
				changed := got[m] != v
				if want := tt.changed == "*" || tt.changed == m; changed != want {
					t.Errorf("%s: version %s → %s, want changed=%t", m, v, got[m], want)
				}
			}
		})
	}
}

// TestLoadErrors: one thing broken in a copy of the fixture each: the
// error names the file, the line and the property.
func TestLoadErrors(t *testing.T) {
	needParser(t)
	for _, tt := range []struct {
		name    string
		breakIt func(t *testing.T, dir string)
		want    []string // each a substring of the error, file relative to the project
	}{
		{"unknown kind", func(t *testing.T, dir string) {
			edit(t, dir, "models/orders.sql", "INCREMENTAL_BY_TIME_RANGE", "INCREMENTAL_BY_UNIQUE_KEY")
		}, []string{"models/orders.sql:6: kind: INCREMENTAL_BY_UNIQUE_KEY is not supported: tidemark maps INCREMENTAL_BY_TIME_RANGE, FULL, VIEW and SEED"}},
		{"another dialect in a model", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "kind VIEW,", "kind VIEW,\n  dialect snowflake,")
		}, []string{"models/customer_totals.sql:5: dialect: dialect snowflake is not supported: tidemark runs SQLMesh models in DuckDB (dialect duckdb)"}},
		{"another dialect in the config", func(t *testing.T, dir string) {
			edit(t, dir, "config.yaml", "dialect: duckdb", "dialect: bigquery")
		}, []string{"config.yaml:12: model_defaults.dialect: dialect bigquery is not supported"}},
		{"no start anywhere: every model's error", func(t *testing.T, dir string) {
			edit(t, dir, "config.yaml", "  start: 2024-01-01\n", "")
		}, []string{
			"models/customer_totals.sql:2: start: missing: tidemark needs a model's start",
			"models/daily_revenue.sql:2: start: missing",
			"models/orders.sql:4: start: missing",
			"models/raw_orders.sql:2: start: missing",
		}},
		{"a relative start", func(t *testing.T, dir string) {
			edit(t, dir, "config.yaml", "start: 2024-01-01", "start: 1 year ago")
		}, []string{"config.yaml:13: model_defaults.start: expected a date 'YYYY-MM-DD' or an ISO timestamp, got '1 year ago' (a relative start"}},
		{"a start off the unit", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "kind FULL,", "kind FULL,\n  start '2024-01-01 06:00',")
		}, []string{"models/daily_revenue.sql:5: start: 2024-01-01T06:00:00Z is not aligned to the day unit"}},
		{"depends_on disagrees", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "kind FULL,", "kind FULL,\n  depends_on [shop.raw_orders],")
		}, []string{"models/daily_revenue.sql:5: depends_on: [shop.raw_orders] disagrees with the models the query reads: [shop.orders]"}},
		{"a read of a table that is no model", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "FROM shop.orders AS o", "FROM shop.orders AS o\nJOIN shop.customers AS c USING (customer_id)")
		}, []string{"models/customer_totals.sql:13: query: reads shop.customers, which is no model of this project"}},
		{"an unknown macro", func(t *testing.T, dir string) {
			edit(t, dir, "models/orders.sql", "AND @end_ts", "AND @foo")
		}, []string{"models/orders.sql:31: query: uses the macro @foo at column 32: only @start_ds"}},
		{"a cycle", func(t *testing.T, dir string) {
			edit(t, dir, "models/orders.sql", "FROM shop.raw_orders", "FROM shop.raw_orders\nWHERE order_id NOT IN (SELECT orders FROM shop.daily_revenue)\n  AND")
			edit(t, dir, "models/orders.sql", "\nWHERE ts BETWEEN", " ts BETWEEN")
		}, []string{"models/orders.sql:31: query: dependency cycle: shop.orders → shop.daily_revenue → shop.orders"}},
		{"a model reading itself", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "FROM kept", "FROM kept, shop.daily_revenue")
		}, []string{"models/daily_revenue.sql:20: query: reads shop.daily_revenue, the model itself"}},
		{"Jinja", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "WHERE o.status = 'paid'", "WHERE o.status = '{{ var(\"status\") }}'")
		}, []string{"models/customer_totals.sql:13: query: Jinja is not supported"}},
		{"a Python model", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "models", "py_model.py"), []byte("def execute(context): ...\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"models/py_model.py:1: Python models are not supported"}},
		{"an unknown audit", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "NUMBER_OF_ROWS(threshold := 0),", "NUMBER_OF_ROWS(threshold := 0),\n    assert_nothing,")
		}, []string{"models/daily_revenue.sql:9: audits: audit assert_nothing: neither a SQLMesh built-in tidemark maps (not_null, unique_values, number_of_rows, accepted_values, accepted_range) nor an AUDIT of audits/"}},
		{"an audit argument not given", func(t *testing.T, dir string) {
			edit(t, dir, "models/orders.sql", "assert_max_amount(max_amount := 1000)", "assert_max_amount")
		}, []string{"audits/amounts.sql:16: audits: audit assert_max_amount uses @max_amount, which the call at "}},
		{"an audit's unknown macro", func(t *testing.T, dir string) {
			edit(t, dir, "audits/amounts.sql", "FROM @this_model\nWHERE amount", "FROM @this_model\nWHERE @bar AND amount")
		}, []string{"audits/amounts.sql:16: audits: audit assert_max_amount uses @bar"}},
		{"an unterminated string in an audit's query", func(t *testing.T, dir string) {
			edit(t, dir, "audits/amounts.sql", "WHERE amount > @max_amount", "WHERE amount > @max_amount\n  AND note <> 'open")
		}, []string{"audits/amounts.sql:17: query: audit assert_max_amount: unterminated string"}},
		{"an audit's column refused by Validate", func(t *testing.T, dir string) {
			edit(t, dir, "models/orders.sql", "unique_values(columns := [order_id])", "unique_values(columns := [\"order id\"])")
		}, []string{"models/orders.sql:15: audits: audit unique_values: audits[1].columns[0] \"order id\": a plain column name"}},
		{"an exclusive range", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "min_v := 0", "min_v := 0, inclusive := false")
		}, []string{"models/daily_revenue.sql:9: audits: audit accepted_range: inclusive := false is not supported"}},
		{"an argument tidemark does not read", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "min_v := 0", "min_v := 0, condition := revenue > 1")
		}, []string{"models/daily_revenue.sql:9: audits: audit accepted_range: argument condition is not read by tidemark's accepted_range"}},
		{"a missing seed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "seeds", "raw_orders.csv")); err != nil {
				t.Fatal(err)
			}
		}, []string{"models/raw_orders.sql:5: kind: SEED: path '../seeds/raw_orders.csv': no such file or directory"}},
		{"a seed too large", func(t *testing.T, dir string) {
			big := "a\n" + strings.Repeat("1\n", models.MaxSeed/2)
			if err := os.WriteFile(filepath.Join(dir, "seeds", "raw_orders.csv"), []byte(big), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"models/raw_orders.sql:5: kind: SEED: path '../seeds/raw_orders.csv' is 524290 bytes: a seed is at most 524288 (models.MaxSeed)"}},
		{"a seed outside the project", func(t *testing.T, dir string) {
			edit(t, dir, "models/raw_orders.sql", "'../seeds/raw_orders.csv'", "'../../raw_orders.csv'")
		}, []string{"models/raw_orders.sql:5: kind: SEED: path '../../raw_orders.csv' is outside the project"}},
		{"a seed linked from outside the project", func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "secret.csv")
			if err := os.WriteFile(outside, []byte("a\n1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "seeds", "linked.csv")); err != nil {
				t.Fatal(err)
			}
			edit(t, dir, "models/raw_orders.sql", "raw_orders.csv", "linked.csv")
		}, []string{"models/raw_orders.sql:5: kind: SEED: path '../seeds/linked.csv': path escapes from parent"}},
		{"a seed with a query", func(t *testing.T, dir string) {
			edit(t, dir, "models/raw_orders.sql", ");\n", ");\nSELECT 1\n")
		}, []string{"models/raw_orders.sql:16: query: a SEED model has no query"}},
		{"a model name twice", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "reporting.customer_totals", "shop.daily_revenue")
		}, []string{"models/daily_revenue.sql:3: name: model shop.daily_revenue is already defined at models/customer_totals.sql:2"}},
		{"a catalog in the name", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "reporting.customer_totals", "db.reporting.customer_totals")
		}, []string{"models/customer_totals.sql:3: name: db.reporting.customer_totals: a catalog.schema.model name is not supported"}},
		{"a reserved schema", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "reporting.customer_totals", "main.customer_totals")
		}, []string{"models/customer_totals.sql:3: name: main.customer_totals: \"main\" is reserved"}},
		{"a block's syntax", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "kind VIEW,", "kind VIEW")
		}, []string{"models/customer_totals.sql:5: kind: VIEW: expected '(' settings ')' or ',', got 'grain'"}},
		{"an interval_unit", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "kind FULL,", "kind FULL,\n  interval_unit 'fortnight',")
		}, []string{"models/daily_revenue.sql:5: interval_unit: unknown interval unit \"fortnight\""}},
		{"errors of several files as they are read", func(t *testing.T, dir string) {
			edit(t, dir, "models/customer_totals.sql", "WHERE o.status = 'paid'", "WHERE o.status = '{% if x %}'")
			edit(t, dir, "audits/amounts.sql", "defaults (column := amount),", "defaults (column := amount),,")
		}, []string{"audits/amounts.sql:4: ", "models/customer_totals.sql:13: query: Jinja is not supported"}},
		// csv_settings change how a seed reads (another delimiter, quote):
		// tidemark reads RFC 4180 CSV only, so they are refused at their
		// line rather than noted and read otherwise.
		{"a seed's csv_settings", func(t *testing.T, dir string) {
			edit(t, dir, "models/raw_orders.sql", "path '../seeds/raw_orders.csv',", "path '../seeds/raw_orders.csv',\n    csv_settings (delimiter = ';'),")
		}, []string{"models/raw_orders.sql:6: kind: SEED: csv_settings are not supported"}},
		// SQLMesh computes no interval after a model's end; tidemark
		// computes a model up to now, so an end is refused at its line
		// rather than noted and passed over (the rows after it would be
		// computed).
		{"a model's end", func(t *testing.T, dir string) {
			edit(t, dir, "models/daily_revenue.sql", "kind FULL,", "kind FULL,\n  end '2024-02-01',")
		}, []string{"models/daily_revenue.sql:5: end: a model's end is not supported"}},
		{"errors of several files together", func(t *testing.T, dir string) {
			edit(t, dir, "models/orders.sql", "INCREMENTAL_BY_TIME_RANGE", "SCD_TYPE_2")
			edit(t, dir, "models/customer_totals.sql", "kind VIEW,", "kind EMBEDDED,")
		}, []string{"models/customer_totals.sql:4: kind: EMBEDDED is not supported", "models/orders.sql:6: kind: SCD_TYPE_2 is not supported"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyFixture(t)
			tt.breakIt(t, dir)
			p, err := Load(context.Background(), dir)
			if err == nil {
				t.Fatalf("loaded: %d models", len(p.Models))
			}
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, models.ErrInvalid) {
				t.Errorf("%v: not ErrInvalid", err)
			}
			msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error\n%s\nwant it to contain\n%s", msg, w)
				}
			}
			if n := len(strings.Split(msg, "\n")); n != len(tt.want) {
				t.Errorf("%d errors, want %d:\n%s", n, len(tt.want), msg)
			}
		})
	}
}

// TestReferenceForms: a table named without its schema is the model of
// that name (the reading model's schema first), "schema"."model" and
// "schema.model" name the model too; each is rewritten "schema.model".
func TestReferenceForms(t *testing.T) {
	needParser(t)
	for _, ref := range []string{"Orders", `"shop"."orders"`, `"shop.orders"`, "SHOP.Orders"} {
		dir := copyFixture(t)
		edit(t, dir, "models/customer_totals.sql", "FROM shop.orders AS o", "FROM "+ref+" AS o")
		p := load(t, dir)
		found := false
		for _, m := range p.Models {
			if m.Register.Model == "reporting.customer_totals" {
				found = true
				if !strings.Contains(m.Register.SQL, `FROM "shop.orders" AS o`) || !reflect.DeepEqual(m.Register.DependsOn, []string{"shop.orders"}) {
					t.Errorf("%s: sql %s, depends_on %v", ref, m.Register.SQL, m.Register.DependsOn)
				}
			}
		}
		if !found {
			t.Fatal("no reporting.customer_totals")
		}
	}
	// A plain name several schemas have is ambiguous.
	dir := copyFixture(t)
	if err := os.WriteFile(filepath.Join(dir, "models", "other_orders.sql"), []byte("MODEL (name other.orders, kind FULL);\nSELECT 1 AS x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edit(t, dir, "models/customer_totals.sql", "FROM shop.orders AS o", "FROM orders AS o")
	_, err := Load(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "customer_totals.sql:12: query: reads orders, which names several models (other.orders, shop.orders): qualify it schema.model") {
		t.Errorf("got %v", err)
	}
}

// TestLoadOneFile: a model file alone is a project of one model; a table
// it reads is no model of it.
func TestLoadOneFile(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	// A file alone takes no model_defaults: its start is its own.
	edit(t, dir, "models/raw_orders.sql", "grain order_id,", "grain order_id,\n  start '2024-01-01',")
	p := load(t, filepath.Join(dir, "models", "raw_orders.sql"))
	if len(p.Models) != 1 || p.Models[0].Register.Model != "shop.raw_orders" || p.Models[0].Register.Seed == "" {
		t.Fatalf("%+v", p.Models)
	}
	// Without the config, daily_revenue.sql has no start.
	_, err := Load(context.Background(), filepath.Join(dir, "models", "daily_revenue.sql"))
	if err == nil || !strings.Contains(err.Error(), "daily_revenue.sql:2: start: missing") {
		t.Errorf("got %v", err)
	}
	edit(t, dir, "models/daily_revenue.sql", "kind FULL,", "kind FULL,\n  start '2024-01-01',")
	_, err = Load(context.Background(), filepath.Join(dir, "models", "daily_revenue.sql"))
	if err == nil || !strings.Contains(err.Error(), "daily_revenue.sql:15: query: reads shop.orders, which is no model of this project") {
		t.Errorf("got %v", err)
	}
}

// TestModelDefaults: model_defaults' cron, interval_unit and owner apply
// to every model that does not set its own; a model's own wins; other
// model_defaults keys are notes.
func TestModelDefaults(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	edit(t, dir, "config.yaml", "cron: '@daily'", "cron: '0 */6 * * *'\n  interval_unit: hour\n  owner: data\n  kind: FULL")
	edit(t, dir, "models/orders.sql", "grain order_id,", "grain order_id,\n  allow_partials true,")
	p := load(t, dir)
	for _, m := range p.Models {
		r := m.Register
		wantCron, wantUnit, wantOwner := "0 */6 * * *", "hour", "data"
		if r.Model == "shop.daily_revenue" {
			wantCron = "@daily" // its own
		}
		if r.Model == "shop.orders" {
			wantOwner = "shop team"
			if !r.AllowPartials {
				t.Errorf("%s: allow_partials not read", r.Model)
			}
		}
		if r.Cron != wantCron || string(r.IntervalUnit) != wantUnit || m.Owner != wantOwner {
			t.Errorf("%s: cron %q unit %q owner %q, want %q %q %q", r.Model, r.Cron, r.IntervalUnit, m.Owner, wantCron, wantUnit, wantOwner)
		}
	}
	want := "config.yaml:17: model_defaults.kind: ignored: tidemark reads start, cron, dialect, interval_unit and owner of model_defaults"
	found := false
	for _, n := range p.Notes {
		found = found || strings.TrimPrefix(n.String(), dir+string(filepath.Separator)) == want
	}
	if !found {
		t.Errorf("no note %q in %v", want, p.Notes)
	}
}

// TestReferenceKeepsItsName: a reference rewritten to the stored form
// "schema.model" keeps the name the query's columns qualify it by (SQL
// names an unaliased table by its own name: orders.amount of FROM
// shop.orders, or of FROM orders), so the stored SQL binds as written.
func TestReferenceKeepsItsName(t *testing.T) {
	needParser(t)
	for _, from := range []string{"shop.orders", "orders", "Shop.Orders", "shop.orders AS orders", "shop.orders orders", "shop.orders AS x"} {
		dir := copyFixture(t)
		q := "orders"
		if strings.HasSuffix(from, " x") {
			q = "x"
		}
		edit(t, dir, "models/customer_totals.sql", "SELECT\n  o.customer_id,\n  count(*) AS orders,\n  sum(o.amount) AS spent\nFROM shop.orders AS o\nWHERE o.status = 'paid'\nGROUP BY o.customer_id",
			"SELECT\n  "+q+".customer_id,\n  count(*) AS orders,\n  sum("+q+".amount) AS spent\nFROM "+from+"\nWHERE "+q+".status = 'paid'\nGROUP BY "+q+".customer_id")
		p := load(t, dir)
		defs := map[string]sqlcheck.Model{}
		for _, m := range p.Models {
			r := m.Register
			defs[r.Model] = sqlcheck.Model{Name: r.Model, SQL: r.SQL, TimeColumn: r.TimeColumn, DependsOn: r.DependsOn, Audits: r.Audits, Grain: r.Grain, Macros: r.Macros,
				Kind: string(r.SnapshotKind), Seed: r.Seed}
		}
		m := defs["reporting.customer_totals"]
		err := sqlcheck.Check(context.Background(), m, func(n string) (sqlcheck.Model, bool) { d, ok := defs[n]; return d, ok })
		if err != nil {
			t.Errorf("FROM %s: the stored SQL does not bind: %v\n%s", from, err, m.SQL)
		}
	}
}

// TestSymlinks: a project reached by a symbolic link to its directory is
// read as the directory; a symbolic link to a directory inside it is not
// followed, and a note says so (never skipped silently).
func TestSymlinks(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	want := versions(load(t, dir))
	link := filepath.Join(t.TempDir(), "project")
	if err := os.Symlink(dir, link); err != nil {
		t.Skip(err)
	}
	if got := versions(load(t, link)); !reflect.DeepEqual(got, want) {
		t.Fatalf("through a link: %v, want %v", got, want)
	}
	// models/more -> a directory outside the project.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "extra.sql"), []byte("MODEL (name shop.extra, kind FULL);\nSELECT 1 AS x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "models", "more")); err != nil {
		t.Fatal(err)
	}
	p := load(t, dir)
	if got := versions(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("with a linked directory: %v, want %v", got, want)
	}
	noted := false
	for _, n := range p.Notes {
		if strings.HasSuffix(n.File, filepath.Join("models", "more")) && strings.Contains(n.Msg, "symbolic link") {
			noted = true
		}
	}
	if !noted {
		t.Errorf("no note about models/more: %+v", p.Notes)
	}
}

// TestReferenceSameName: two models of one name in different schemas,
// both unaliased, are not both aliased by that name (the engine refuses
// a duplicate alias): the query joining them USING a column still binds.
func TestReferenceSameName(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	if err := os.WriteFile(filepath.Join(dir, "models", "other_orders.sql"), []byte("MODEL (name other.orders, kind FULL);\nSELECT 1 AS customer_id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edit(t, dir, "models/customer_totals.sql", "FROM shop.orders AS o", "FROM other.orders JOIN shop.orders AS o USING (customer_id) JOIN shop.orders USING (customer_id)")
	edit(t, dir, "models/customer_totals.sql", "SELECT\n  o.customer_id", "SELECT\n  customer_id")
	edit(t, dir, "models/customer_totals.sql", "GROUP BY o.customer_id", "GROUP BY customer_id")
	p := load(t, dir)
	defs := map[string]sqlcheck.Model{}
	for _, m := range p.Models {
		r := m.Register
		defs[r.Model] = sqlcheck.Model{Name: r.Model, SQL: r.SQL, TimeColumn: r.TimeColumn, DependsOn: r.DependsOn, Audits: r.Audits, Grain: r.Grain, Macros: r.Macros,
			Kind: string(r.SnapshotKind), Seed: r.Seed}
	}
	m := defs["reporting.customer_totals"]
	if err := sqlcheck.Check(context.Background(), m, func(n string) (sqlcheck.Model, bool) { d, ok := defs[n]; return d, ok }); err != nil {
		t.Errorf("the stored SQL does not bind: %v\n%s", err, m.SQL)
	}
}

// TestDisabledModel: a model with enabled false is not loaded (SQLMesh
// does not load it): no registration, a note; a model reading it reads
// no model of the project. A value not a boolean is refused at its line.
func TestDisabledModel(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	if err := os.WriteFile(filepath.Join(dir, "models", "off.sql"), []byte("MODEL (\n  name shop.off,\n  kind FULL,\n  enabled false\n);\nSELECT 1 AS x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := load(t, dir)
	if _, ok := versions(p)["shop.off"]; ok {
		t.Fatal("a disabled model is registered")
	}
	noted := false
	for _, n := range p.Notes {
		if strings.HasSuffix(n.File, "off.sql") && n.Line == 4 && n.Property == "enabled" {
			noted = true
		}
	}
	if !noted {
		t.Errorf("no note at off.sql:4 enabled: %v", p.Notes)
	}
	edit(t, dir, "models/off.sql", "enabled false", "enabled 'maybe'")
	if _, err := Load(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "off.sql:4: enabled: ") {
		t.Errorf("enabled 'maybe': got %v", err)
	}
	edit(t, dir, "models/off.sql", "enabled 'maybe'", "enabled true")
	if _, ok := versions(load(t, dir))["shop.off"]; !ok {
		t.Error("an enabled model is not registered")
	}
}

// TestAuditArgumentsEquals: an audit's arguments written name = value
// (SQLMesh reads them as name := value, and projects write them so:
// not_null(columns=[id])) are read as with :=.
func TestAuditArgumentsEquals(t *testing.T) {
	needParser(t)
	audits := func(dir string) []models.Audit {
		for _, m := range load(t, dir).Models {
			if m.Register.Model == "shop.orders" {
				return m.Register.Audits
			}
		}
		t.Fatal("no shop.orders")
		return nil
	}
	want := audits(copyFixture(t))
	dir := copyFixture(t)
	edit(t, dir, "models/orders.sql", "not_null(columns := [order_id, customer_id, ts])", "not_null(columns=[order_id, customer_id, ts])")
	edit(t, dir, "models/orders.sql", "accepted_values(column := status, is_in := ['new', 'paid', 'refunded'])", "accepted_values(column = status, is_in = ['new', 'paid', 'refunded'])")
	edit(t, dir, "models/orders.sql", "assert_max_amount(max_amount := 1000)", "assert_max_amount(max_amount=1000)")
	if got := audits(dir); !reflect.DeepEqual(got, want) {
		t.Errorf("with '=': %+v\nwant %+v", got, want)
	}
}

// TestConfigJinja: SQLMesh renders config.yaml with Jinja before reading
// it, so a project's config commonly holds {{ env_var(…) }} in keys
// tidemark does not read (a gateway's credentials): it loads; a Jinja
// expression in a model_defaults value tidemark reads, or a Jinja
// statement, is refused at its line.
func TestConfigJinja(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	want := versions(load(t, dir))
	edit(t, dir, "config.yaml", "database: shop.db", "database: {{ env_var('DB_PATH', 'shop.db') }}\n      password: \"{{ env_var('PW') }}\" {# a comment #}")
	if got := versions(load(t, dir)); !reflect.DeepEqual(got, want) {
		t.Fatalf("with Jinja in a gateway: %v, want %v", got, want)
	}
	for _, c := range []struct{ old, new, want string }{
		{"start: 2024-01-01", "start: {{ env_var('START') }}", "config.yaml:13: model_defaults.start: "},
		{"gateways:", "{% if true %}\ngateways:", "config.yaml:4: "},
	} {
		d := copyFixture(t)
		edit(t, d, "config.yaml", c.old, c.new)
		_, err := Load(context.Background(), d)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Jinja") {
			t.Errorf("%s: got %v, want %q and Jinja", c.new, err, c.want)
		}
	}
}

// TestQueryEndsWithComment: a query's final ';' followed by a comment
// (SQLMesh reads the file's statements; the comment is none) is dropped
// like a final ';' alone, in a model's query and in an audit's: the
// stored SQL passes the check.
func TestQueryEndsWithComment(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	edit(t, dir, "models/daily_revenue.sql", "GROUP BY 1", "GROUP BY 1; -- one row per day\n/* the end */")
	edit(t, dir, "audits/amounts.sql", "WHERE @column <= 0;", "WHERE @column <= 0; -- the first audit\n\n-- the second:")
	p := load(t, dir)
	defs := map[string]sqlcheck.Model{}
	for _, m := range p.Models {
		r := m.Register
		defs[r.Model] = sqlcheck.Model{Name: r.Model, SQL: r.SQL, TimeColumn: r.TimeColumn, DependsOn: r.DependsOn, Audits: r.Audits, Grain: r.Grain, Macros: r.Macros,
			Kind: string(r.SnapshotKind), Seed: r.Seed}
	}
	for _, n := range []string{"shop.daily_revenue", "shop.orders"} {
		if err := sqlcheck.Check(context.Background(), defs[n], func(n string) (sqlcheck.Model, bool) { d, ok := defs[n]; return d, ok }); err != nil {
			t.Errorf("%s: %v\n%s", n, err, defs[n].SQL)
		}
	}
}

// TestDependsOnSubset: SQLMesh's depends_on adds to the models inferred
// from the query, so one naming some of them (as a project may, to be
// explicit) is accepted; one naming a model the query does not read is
// refused (TestLoadErrors).
func TestDependsOnSubset(t *testing.T) {
	needParser(t)
	dir := copyFixture(t)
	edit(t, dir, "models/daily_revenue.sql", "FROM kept", "FROM kept WHERE EXISTS (SELECT 1 FROM shop.raw_orders)")
	edit(t, dir, "models/daily_revenue.sql", "kind FULL,", "kind FULL,\n  depends_on [shop.orders],")
	for _, m := range load(t, dir).Models {
		if m.Register.Model == "shop.daily_revenue" && !reflect.DeepEqual(m.Register.DependsOn, []string{"shop.orders", "shop.raw_orders"}) {
			t.Errorf("depends_on %v", m.Register.DependsOn)
		}
	}
}
