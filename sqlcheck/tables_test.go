package sqlcheck

import (
	"context"
	"errors"
	"testing"
)

func TestTables(t *testing.T) {
	if !Available() {
		t.Skip("no DuckDB parser in this build")
	}
	sql := "WITH o AS (SELECT * FROM sushi.orders WHERE ts >= @start_ts)\n" +
		"SELECT * FROM o JOIN \"sushi\" . \"Items\" AS i ON true, waiters, (SELECT 1 FROM o) x\n" +
		"WHERE EXISTS (SELECT 1 FROM db.raw.customers)"
	refs, err := Tables(context.Background(), sql, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sushi.orders", `"sushi" . "Items"`, "waiters", "db.raw.customers"}
	if len(refs) != len(want) {
		t.Fatalf("got %+v, want %d refs %v", refs, len(want), want)
	}
	for i, r := range refs {
		if got := sql[r.Start:r.End]; got != want[i] {
			t.Errorf("ref %d: text %q, want %q (%+v)", i, got, want[i], r)
		}
	}
	if refs[1].Schema != "sushi" || refs[1].Name != "Items" || refs[3].Qualified() != "db.raw.customers" || refs[2].Qualified() != "waiters" {
		t.Errorf("parts: %+v", refs)
	}

	_, err = Tables(context.Background(), "SELECT * FROM\n  (SELECT FROM WHERE", "")
	var e *Error
	if !errors.As(err, &e) || e.Line == 0 {
		t.Fatalf("a parse error: got %v, want an *Error with a line", err)
	}
}

// Rewrite with QuoteModels turns a project's schema-qualified model
// references into the one quoted identifier the stored SQL reads, and
// leaves comments, literals, aliases, CTEs, other tables and references
// already quoted whole as they were.
func TestRewriteQualifiedModels(t *testing.T) {
	if !Available() {
		t.Skip("no DuckDB parser in this build")
	}
	sql := "-- reads sushi.orders\n" +
		"WITH orders AS (SELECT * FROM sushi.orders WHERE ts >= @start_ts) /* sushi.orders */\n" +
		"SELECT 'sushi.orders' AS s, o.id, \"sushi.orders\".id AS q\n" +
		"FROM orders o JOIN \"sushi\" . \"items\" AS i ON i.id = o.id\n" +
		"JOIN SUSHI.Waiters w ON true JOIN raw.events e ON true JOIN \"sushi.orders\" ON true\n" +
		"JOIN db.sushi.orders d ON true JOIN sushi.unknown u ON true"
	refs, err := Tables(context.Background(), sql, "")
	if err != nil {
		t.Fatal(err)
	}
	project := map[string]bool{"sushi.orders": true, "sushi.items": true, "sushi.waiters": true}
	got := Rewrite(sql, refs, QuoteModels(func(n string) bool { return project[n] }))
	want := "-- reads sushi.orders\n" +
		"WITH orders AS (SELECT * FROM \"sushi.orders\" AS \"orders\" WHERE ts >= @start_ts) /* sushi.orders */\n" +
		"SELECT 'sushi.orders' AS s, o.id, \"sushi.orders\".id AS q\n" +
		"FROM orders o JOIN \"sushi.items\" AS i ON i.id = o.id\n" +
		"JOIN \"sushi.waiters\" w ON true JOIN raw.events e ON true JOIN \"sushi.orders\" ON true\n" +
		"JOIN db.sushi.orders d ON true JOIN sushi.unknown u ON true"
	if got != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", got, want)
	}
	// The rewritten SQL reads the models as single identifiers: a
	// second rewrite changes nothing.
	again, err := Tables(context.Background(), got, "")
	if err != nil {
		t.Fatal(err)
	}
	if twice := Rewrite(got, again, QuoteModels(func(n string) bool { return project[n] })); twice != got {
		t.Fatalf("a second rewrite changed:\n%s", twice)
	}
	// Offsets that do not fit are left alone.
	if s := Rewrite("SELECT 1", []TableRef{{Schema: "a", Name: "b", Start: 5, End: 50}}, func(TableRef) (string, bool) { return "x", true }); s != "SELECT 1" {
		t.Fatalf("out of range: %q", s)
	}
}
