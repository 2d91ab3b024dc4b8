package scenario

import (
	"fmt"
	"strings"
	"testing"
)

// A scenario's model (and a plan's version of it) takes grain as a list
// or one column; a bad one is refused naming grain[i].
func TestParseGrain(t *testing.T) {
	body := `name: grain
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-11-30T00:00:00Z
    time_column: ts
    grain: [id, ts]
    sql: SELECT 1 AS id, @start_ts AS ts
steps:
  - plan:
      id: p1
      env: prod
      versions:
        events: {version: v2, grain: id}
`
	f, err := Parse("grain.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if g := f.Models["events"].Grain; fmt.Sprint(g) != "[id ts]" {
		t.Fatalf("the model's grain: %q", g)
	}
	if g := f.Steps[0].Versions["events"].Model.Grain; fmt.Sprint(g) != "[id]" {
		t.Fatalf("the version's grain: %q", g)
	}
	_, err = Parse("grain.yaml", []byte(strings.Replace(body, "[id, ts]", "[id, id]", 1)))
	if err == nil || !strings.Contains(err.Error(), "grain[1]") {
		t.Fatalf("a repeated grain column: %v", err)
	}
}
