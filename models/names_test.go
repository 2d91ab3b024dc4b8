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
