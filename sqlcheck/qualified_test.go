//go:build cgo

package sqlcheck

import (
	"strings"
	"testing"
)

// A schema-qualified upstream model is read as the one quoted identifier
// "sushi.events" (a table of that name, no schema) when depends_on lists
// it, and binds against its columns (the sandbox creates the table under
// that quoted name); every truly qualified reference is still refused,
// and a reserved part makes the whole name reserved.
func TestQualifiedUpstream(t *testing.T) {
	ev := eventsModel
	ev.Name = "sushi.events"
	up := lookup(ev)
	rollupOf := func(from string, deps ...string) Model {
		if deps == nil {
			deps = []string{"sushi.events"}
		}
		return Model{Name: "sushi.rollup", TimeColumn: "day", DependsOn: deps, SQL: strings.Replace(rollupSQL, "FROM events", "FROM "+from, 1)}
	}
	if err := Check(t.Context(), rollupOf(`"sushi.events"`), up); err != nil {
		t.Fatalf("reading \"sushi.events\": %v", err)
	}
	top := Model{Name: "top", TimeColumn: "day", DependsOn: []string{"sushi.rollup"}, SQL: `SELECT day, views FROM "sushi.rollup"`}
	if err := Check(t.Context(), top, lookup(ev, rollupOf(`"sushi.events"`))); err != nil {
		t.Fatalf("two levels of qualified upstream: %v", err)
	}
	misspelt := rollupOf(`"sushi.events"`)
	misspelt.SQL = strings.Replace(misspelt.SQL, "count(DISTINCT user_id)", "count(DISTINCT nope)", 1)
	reservedUp := eventsModel
	reservedUp.Name = "tidemark.events"
	up = lookup(ev, reservedUp)
	for _, c := range []struct {
		name string
		m    Model
		want string
	}{
		{"unquoted sushi.events", rollupOf("sushi.events"), `reads sushi.events as a qualified table: a schema-qualified model is read as the one quoted identifier "sushi.events"`},
		{"\"sushi\".\"events\"", rollupOf(`"sushi"."events"`), `the one quoted identifier "sushi.events"`},
		{"another schema's table", rollupOf("prod.events"), "never a qualified table"},
		{"the env view of the model", rollupOf("sushi__prod.events"), "never a qualified table"},
		{"a catalog", rollupOf("db.sushi.events"), "never a qualified table"},
		{"not declared", rollupOf(`"sushi.other"`), `reads "sushi.other", which is neither a model it depends on`},
		{"a column misspelt", misspelt, `does not bind`},
		{"a reserved schema part", rollupOf(`"tidemark.events"`, "tidemark.events"), `depends on "tidemark.events", a reserved name`},
		{"a reserved model part", rollupOf(`"x.pg_class"`), `reads "x.pg_class", a reserved name`},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c.m, up, c.want) })
	}
	for _, n := range []string{"tidemark.x", "x.pg_class", "main.orders", "a.information_schema"} {
		if !Reserved(n) {
			t.Errorf("%s is not reserved", n)
		}
	}
	if Reserved("sushi.orders") {
		t.Error("sushi.orders is reserved")
	}
}
