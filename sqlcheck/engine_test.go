//go:build cgo

package sqlcheck

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
)

// TestForEngine: the engine's check reads each upstream model's latest
// registered version from the state, transitively, and answers a refusal
// as an invalid command naming the field.
func TestForEngine(t *testing.T) {
	st := projections.New()
	ids := events.NewIDSource()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	reg := func(model, version, sql, tc string, deps ...string) {
		seq++
		ev := events.New(ids, t0, events.SnapshotRegistered{Snapshot: model + "@" + version, Model: model, Version: version, Cron: "0 * * * *",
			Unit: "hour", Start: t0, Kind: events.Incremental, Table: model + "@" + version, SQL: sql, TimeColumn: tc, DependsOn: deps})
		if err := projections.Apply(st, seq, ev); err != nil {
			t.Fatal(err)
		}
	}
	reg("events", "v1", "SELECT @start_ts AS ts, 1 AS user_id", "ts")
	reg("events", "v2", "SELECT @start_ts AS ts, 1 AS account_id", "ts") // the latest: user_id is gone
	reg("rollup", "v1", "SELECT ts AS day, account_id FROM events", "day", "events")
	check := ForEngine(func(fn func(*projections.State)) { fn(st) })
	ok := &commands.RegisterSnapshot{Model: "top", Version: "v1", DependsOn: []string{"rollup"}, SQL: "SELECT day, account_id FROM rollup", TimeColumn: "day"}
	if err := check(t.Context(), ok); err != nil {
		t.Fatalf("two levels of upstream: %v", err)
	}
	bad := &commands.RegisterSnapshot{Model: "m", Version: "v1", DependsOn: []string{"events"}, SQL: "SELECT ts, user_id FROM events", TimeColumn: "ts"}
	var ce *commands.Error
	if err := check(t.Context(), bad); !errors.As(err, &ce) || ce.Code != commands.CodeInvalid || ce.Field != "sql" {
		t.Fatalf("a column of an older version of the upstream: got %v, want invalid on sql", err)
	}
	// SQLMesh's vocabulary: the command's (its SQL and audits) and each
	// upstream snapshot's own.
	seq++
	ev := events.New(ids, t0, events.SnapshotRegistered{Snapshot: "src@v1", Model: "src", Version: "v1", Cron: "0 * * * *", Unit: "hour", Start: t0,
		Kind: events.Incremental, Table: "src@v1", SQL: "SELECT @start_dt AS ts, @end_ds AS ds", TimeColumn: "ts", Macros: models.MacrosSQLMesh})
	if err := projections.Apply(st, seq, ev); err != nil {
		t.Fatal(err)
	}
	sm := &commands.RegisterSnapshot{Model: "sm", Version: "v1", DependsOn: []string{"src"}, SQL: "SELECT ts FROM src WHERE ds BETWEEN @start_ds AND @end_ds", TimeColumn: "ts",
		Macros: models.MacrosSQLMesh, Audits: []models.Audit{{Name: "a", Kind: models.AuditCustom, SQL: "SELECT * FROM @this_model WHERE ts > @end_ts"}}}
	if err := check(t.Context(), sm); err != nil {
		t.Fatalf("SQLMesh's vocabulary: %v", err)
	}
	sm.Macros = ""
	if err := check(t.Context(), sm); !errors.As(err, &ce) || ce.Field != "sql" || !strings.Contains(ce.Error(), "@start_ds") {
		t.Fatalf("SQLMesh's macros in tidemark's vocabulary: got %v, want invalid on sql naming @start_ds", err)
	}
	if err := check(t.Context(), &commands.BuildPlan{Plan: "p", Env: "prod"}); err != nil {
		t.Fatalf("another command: %v", err)
	}

	// A set: each registration's upstream models are the set's where it
	// defines them (events@v3 brings user_id back), the registered
	// ones' otherwise; a refusal names the registration.
	set := &commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{
		{Model: "events", Version: "v3", SQL: "SELECT @start_ts AS ts, 1 AS user_id", TimeColumn: "ts"},
		{Model: "m", Version: "v1", DependsOn: []string{"events"}, SQL: "SELECT ts, user_id FROM events", TimeColumn: "ts"},
	}}
	if err := check(t.Context(), set); err != nil {
		t.Fatalf("a set reading its own upstream: %v", err)
	}
	set.Snapshots[1].SQL = "SELECT ts, account_id FROM events"
	if err := check(t.Context(), set); !errors.As(err, &ce) || ce.Code != commands.CodeInvalid || ce.Field != "snapshots[1].sql" {
		t.Fatalf("a set's registration reading a column its upstream in the set lacks: got %v, want invalid on snapshots[1].sql", err)
	}
	// Checked side by side: the first refusal in the set's order.
	for range 5 {
		two := &commands.RegisterSnapshots{Snapshots: append(set.Snapshots[:2:2], commands.RegisterSnapshot{Model: "n", Version: "v1", DependsOn: []string{"events"}, SQL: "SELECT nope FROM events", TimeColumn: "ts"})}
		if err := check(t.Context(), two); !errors.As(err, &ce) || ce.Field != "snapshots[1].sql" {
			t.Fatalf("two refusals: got %v, want the first, on snapshots[1].sql", err)
		}
	}
	set.Snapshots = []commands.RegisterSnapshot{{Model: "m", Version: "v1", DependsOn: []string{"events"}, SQL: "SELECT ts, user_id FROM events", TimeColumn: "ts"}}
	if err := check(t.Context(), set); !errors.As(err, &ce) || ce.Field != "snapshots[0].sql" {
		t.Fatalf("a set without its upstream's new version: got %v, want invalid on snapshots[0].sql", err)
	}
}
