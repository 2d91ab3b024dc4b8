//go:build cgo

package sqlcheck

import (
	"errors"
	"strings"
	"testing"
)

// TestWholeKinds: full and view models have no time column; a seed has no
// SQL, its content is read as the warehouse reads it, and a model reading
// it binds against the columns found there.
func TestWholeKinds(t *testing.T) {
	people := Model{Name: "people", Kind: "seed", Seed: "id,name,born\n1,a,2000-01-02\n2,b,1999-12-31\n"}
	for _, c := range []struct {
		name  string
		m     Model
		up    Lookup
		field string // "": accepted
		msg   string
	}{
		{"full without a time column", Model{Name: "totals", Kind: "full", DependsOn: []string{"events"},
			SQL: "SELECT user_id, count(*) AS n FROM events WHERE ts < @end_ts GROUP BY 1"}, lookup(eventsModel), "", ""},
		{"view without a time column", Model{Name: "v", Kind: "view", DependsOn: []string{"events"},
			SQL: "SELECT user_id FROM events"}, lookup(eventsModel), "", ""},
		{"full still bound", Model{Name: "totals", Kind: "full", DependsOn: []string{"events"},
			SQL: "SELECT usr FROM events"}, lookup(eventsModel), "sql", "usr"},
		{"incremental still needs its time column", Model{Name: "x", DependsOn: []string{"events"},
			SQL: "SELECT user_id FROM events"}, lookup(eventsModel), "time_column", ""},
		{"a seed", people, nil, "", ""},
		{"a seed that is no CSV", Model{Name: "bad", Kind: "seed", Seed: "a,b\n1,2\n3,4,5,6\n"}, nil, "seed", ""},
		{"reading a seed", Model{Name: "ages", Kind: "full", DependsOn: []string{"people"},
			SQL: "SELECT id, name, date_diff('year', born, DATE '2020-01-01') AS age FROM people"}, lookup(people), "", ""},
		{"reading a seed's missing column", Model{Name: "ages", Kind: "full", DependsOn: []string{"people"},
			SQL: "SELECT nam FROM people"}, lookup(people), "sql", "nam"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(t.Context(), c.m, c.up)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(e.Error(), c.msg) {
				t.Fatalf("Check = %v, want a refusal of %s mentioning %q", err, c.field, c.msg)
			}
		})
	}
}
