package models

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A model's name becomes its views' identifier: lower-case only (DuckDB
// folds case) and at most 63 bytes (Postgres cuts longer identifiers).
func TestModelNameIsAWarehouseIdentifier(t *testing.T) {
	base := Definition{Model: "events", Version: "v1", Cron: "@hourly", Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, name := range []string{"Events", "EVENTS", strings.Repeat("m", 64), "pg_authid", "pg_statistic", "duckdb_tables", "sqlite_master", "information_schema", "main", "tidemark", "tidemark_meta"} {
		d := base
		d.Model = name
		err := d.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "model" || fe.Key != "name" || !errors.Is(err, ErrInvalid) {
			t.Errorf("model %q: %v, want a FieldError on model", name, err)
		}
	}
	for _, name := range []string{"events", "page-views_2", strings.Repeat("m", 63)} {
		d := base
		d.Model = name
		if err := d.Validate(); err != nil {
			t.Errorf("model %q: %v", name, err)
		}
	}
}

// Table names fit 63 bytes and stay one-to-one: a model name that fits
// keeps today's form (existing warehouses keep their tables), a longer one
// is cut and gets a longer digest, and the versions of one long model get
// distinct tables (Postgres cut the old form of a 50+-byte model to one
// table for every version).
func TestTableName(t *testing.T) {
	// Today's form, as computed before 63 bytes mattered.
	if got := TableName("events@v1"); got != "events__ca9f0dae2c02" {
		t.Errorf("TableName(events@v1) = %s, want today's events__ca9f0dae2c02", got)
	}
	seen := map[string]string{}
	for _, n := range []int{1, 48, 49, 50, 51, 61, 63, 64, 128} {
		model := strings.Repeat("m", n)
		for _, v := range []string{"v1", "v2", "v1+p1"} {
			id := model + "@" + v
			name := TableName(id)
			if len(name) > MaxIdentBytes {
				t.Errorf("TableName(%d-byte model @%s) is %d bytes", n, v, len(name))
			}
			if other, dup := seen[name]; dup {
				t.Errorf("%s and %s share the table %s", other, id, name)
			}
			seen[name] = id
			if n <= 49 && name != model+"__"+name[len(model)+2:] {
				t.Errorf("TableName(%s) = %s, want today's form", id, name)
			}
		}
	}
}

// A model's name may be schema-qualified: one '.', each part a warehouse
// name under the same rules (lower case, 63 bytes, not reserved); the
// dot is for model names only, and depends_on may name such a model.
func TestQualifiedModelName(t *testing.T) {
	base := Definition{Model: "events", Version: "v1", Cron: "@hourly", Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, name := range []string{"sushi.orders", "a.b", strings.Repeat("s", 63) + "." + strings.Repeat("m", 63), "sushi.page-views_2"} {
		d := base
		d.Model = name
		d.DependsOn = []string{"raw.events", "plain"}
		if err := d.Validate(); err != nil {
			t.Errorf("model %q: %v", name, err)
		}
	}
	for name, why := range map[string]string{
		"a.b.c": "one '.'", ".a": "one '.'", "a.": "one '.'", "Sushi.orders": "lower-case", "sushi.Orders": "lower-case",
		"tidemark.orders": "its schema \"tidemark\" is reserved", "sushi.pg_class": "its model \"pg_class\" is reserved",
		"main.orders": "its schema \"main\" is reserved", "information_schema.tables": "reserved",
		strings.Repeat("s", 64) + ".m": "its schema", "s." + strings.Repeat("m", 64): "its model",
	} {
		d := base
		d.Model = name
		err := d.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "model" || fe.Key != "name" || !strings.Contains(fe.Msg, why) {
			t.Errorf("model %q: %v, want a FieldError on model saying %q", name, err, why)
		}
	}
	d := base
	d.DependsOn = []string{"a.b.c"}
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "depends_on[0]") {
		t.Errorf("depends_on a.b.c: %v", err)
	}
	if err := CheckWarehouseName("env", "a.b"); err == nil {
		t.Error("an environment's name takes no dot")
	}
	if err := CheckVersion("a.b"); err == nil {
		t.Error("a version takes no dot")
	}
}

// The view of a schema-qualified model is <schema>__<env>.<model>; an
// unqualified model's stays <env>.<model>. The view's schema must fit 63
// bytes, checked per environment.
func TestViewOf(t *testing.T) {
	for _, c := range []struct{ env, model, schema, view string }{
		{"prod", "sushi.orders", "sushi__prod", "orders"},
		{"dev", "sushi.orders", "sushi__dev", "orders"},
		{"prod", "orders", "prod", "orders"},
	} {
		if s, v := ViewOf(c.env, c.model); s != c.schema || v != c.view {
			t.Errorf("ViewOf(%s, %s) = %s.%s, want %s.%s", c.env, c.model, s, v, c.schema, c.view)
		}
	}
	if err := CheckViewSchema("versions", strings.Repeat("e", 30), strings.Repeat("s", 31)+".m"); err != nil {
		t.Errorf("a 63-byte view schema: %v", err)
	}
	err := CheckViewSchema("versions", strings.Repeat("e", 30), strings.Repeat("s", 32)+".m")
	if err == nil || err.Field != "versions" || !strings.Contains(err.Msg, "64 bytes") {
		t.Errorf("a 64-byte view schema: %v", err)
	}
	if err := CheckViewSchema("versions", strings.Repeat("e", 63), "m"); err != nil {
		t.Errorf("an unqualified model's view schema is the env's: %v", err)
	}
}

// A schema-qualified model's table replaces the dot by "__" (golden: the
// digests are sha256sum's of the ids);
// the digest, of the id itself, keeps sushi.orders and sushi__orders
// apart; a long qualified name is cut like any other.
func TestQualifiedTableName(t *testing.T) {
	golden := map[string]string{
		"sushi.orders@v1":  "sushi__orders__3974a67124f9",
		"sushi__orders@v1": "sushi__orders__51eae6260176",
		"a.b@v1+p1":        "a__b__352d8a442492",
	}
	for id, want := range golden {
		if got := TableName(id); got != want {
			t.Errorf("TableName(%s) = %s, want %s", id, got, want)
		}
	}
	long := TableName(strings.Repeat("s", 63) + "." + strings.Repeat("m", 63) + "@v1")
	if len(long) != MaxIdentBytes || !strings.HasPrefix(long, strings.Repeat("s", 37)) || strings.Contains(long, ".") {
		t.Errorf("a long qualified model's table: %s (%d bytes)", long, len(long))
	}
}
