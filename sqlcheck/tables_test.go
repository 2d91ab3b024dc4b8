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
