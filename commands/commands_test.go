package commands

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
)

// Validate refuses what a user may not define: a version with '+'
// (reserved for derived versions), a start off its unit, a plan that sets
// nothing. References to derived versions stay valid.
func TestValidate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	hour := []interval.Range{interval.R(t0, t0.Add(time.Hour))}
	meta := Meta{ID: "c1"}
	reg := func(version, cron string, unit interval.Unit, start time.Time) *RegisterSnapshot {
		return &RegisterSnapshot{Meta: meta, Model: "events", Version: version, Cron: cron, IntervalUnit: unit, Start: start}
	}
	long := strings.Repeat("a", 128)
	cases := []struct {
		name  string
		cmd   Command
		field string // "" when valid
		msg   string
	}{
		{"plain version", reg("v1", "@hourly", "", t0), "", ""},
		{"derived-looking version", reg("v1+p1", "@hourly", "", t0), "version", "'+' is reserved for derived versions"},
		{"version ending in +", reg("v1+", "@hourly", "", t0), "version", "'+' is reserved for derived versions"},
		{"version of two +", reg("v1+p1+p2", "@hourly", "", t0), "version", "'+' is reserved for derived versions"},
		{"version of 129", reg(long+"a", "@hourly", "", t0), "version", "at most 128"},
		{"start off the cron's unit", reg("v1", "@daily", "", t0.Add(5*time.Hour)), "start", "not aligned to the day unit"},
		{"start on the explicit unit", reg("v1", "@daily", interval.Hour, t0.Add(5*time.Hour)), "", ""},
		{"start off the explicit unit", reg("v1", "@daily", interval.Hour, t0.Add(30*time.Minute)), "start", "not aligned to the hour unit"},
		{"start off by a second", reg("v1", "*/5 * * * *", "", t0.Add(time.Second)), "start", "not aligned to the five_minute unit"},
		{"start off the month unit", reg("v1", "@monthly", "", t0.AddDate(0, 0, 1)), "start", "not aligned to the month unit"},
		{"start on the month unit", reg("v1", "@monthly", "", t0), "", ""},
		{"start aligned in another zone", reg("v1", "@hourly", "", t0.In(time.FixedZone("x", 5*3600+1800))), "", ""},
		{"plan of plain versions", &BuildPlan{Meta: meta, Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v2"}}, "", ""},
		{"plan setting a derived version", &BuildPlan{Meta: meta, Plan: "p2", Env: "prod", Versions: map[string]string{"sessions": "v1+p1"}}, "", ""},
		{"plan setting a bad version", &BuildPlan{Meta: meta, Plan: "p2", Env: "prod", Versions: map[string]string{"sessions": "v1+p1+p2"}}, "versions.sessions", ""},
		{"plan setting nothing", &BuildPlan{Meta: meta, Plan: "p1", Env: "prod", Versions: map[string]string{}}, "versions", "at least one version"},
		{"plan without versions", &BuildPlan{Meta: meta, Plan: "p1", Env: "prod"}, "versions", "at least one version"},
		{"complete a derived version", &CompleteIntervals{Meta: meta, Model: "sessions", Version: "v1+p1", Ranges: hour}, "", ""},
		{"complete a derived version of 257", &CompleteIntervals{Meta: meta, Model: "sessions", Version: long + "+" + long, Ranges: hour}, "", ""},
		{"complete a chained version", &CompleteIntervals{Meta: meta, Model: "sessions", Version: "v1+p1+p2", Ranges: hour}, "version", ""},
		{"invalidate a derived version", &InvalidateIntervals{Meta: meta, Model: "sessions", Version: "v1+p1", Ranges: hour}, "", ""},
		{"invalidate an empty derivation", &InvalidateIntervals{Meta: meta, Model: "sessions", Version: "v1+", Ranges: hour}, "version", ""},
		{"fail a derived version", &FailRun{Meta: meta, Model: "sessions", Version: "v1+p1", Ranges: hour, RunKind: "backfill", Error: "exit 1", Attempt: 1}, "", ""},
		{"fail a chained version", &FailRun{Meta: meta, Model: "sessions", Version: "v1+p1+p2", Ranges: hour, RunKind: "backfill", Error: "exit 1", Attempt: 1}, "version", ""},
		{"restate", &Restate{Meta: meta, Env: "prod", Model: "events", Ranges: hour, Reason: "source fixed"}, "", ""},
		{"restate without env", &Restate{Meta: meta, Model: "events", Ranges: hour}, "env", "env is required"},
		{"restate a bad model", &Restate{Meta: meta, Env: "prod", Model: "a b", Ranges: hour}, "model", ""},
		{"restate nothing", &Restate{Meta: meta, Env: "prod", Model: "events"}, "ranges", "at least one range"},
		{"restate an empty range", &Restate{Meta: meta, Env: "prod", Model: "events", Ranges: []interval.Range{interval.R(t0, t0)}}, "ranges[0]", "end is not after start"},
		{"restate with a control character", &Restate{Meta: meta, Env: "prod", Model: "events", Ranges: hour, Reason: "a\nb"}, "reason", "control character"},
		// Schema-qualified model names: the dot is for models only, and
		// the view's schema <schema>__<env> must fit 63 bytes.
		{"register sushi.orders", &RegisterSnapshot{Meta: meta, Model: "sushi.orders", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"raw.events"}}, "", ""},
		{"register a reserved schema", &RegisterSnapshot{Meta: meta, Model: "tidemark.orders", Version: "v1", Cron: "@hourly", Start: t0}, "model", "reserved"},
		{"register two dots", &RegisterSnapshot{Meta: meta, Model: "a.b.c", Version: "v1", Cron: "@hourly", Start: t0}, "model", "schema.model"},
		{"plan sushi.orders", &BuildPlan{Meta: meta, Plan: "p1", Env: "prod", Versions: map[string]string{"sushi.orders": "v1"}}, "", ""},
		{"plan a view schema of 63", &BuildPlan{Meta: meta, Plan: "p1", Env: strings.Repeat("e", 30), Versions: map[string]string{strings.Repeat("s", 31) + ".o": "v1"}}, "", ""},
		{"plan a view schema of 64", &BuildPlan{Meta: meta, Plan: "p1", Env: strings.Repeat("e", 30), Versions: map[string]string{strings.Repeat("s", 32) + ".o": "v1"}}, "versions." + strings.Repeat("s", 32) + ".o", "its view's schema"},
		{"plan into a dotted env", &BuildPlan{Meta: meta, Plan: "p1", Env: "a.b", Versions: map[string]string{"events": "v1"}}, "env", ""},
		{"plan a dotted plan id", &BuildPlan{Meta: meta, Plan: "p.1", Env: "prod", Versions: map[string]string{"events": "v1"}}, "plan", ""},
		{"complete sushi.orders", &CompleteIntervals{Meta: meta, Model: "sushi.orders", Version: "v1+p1", Ranges: hour}, "", ""},
		{"complete a dotted version", &CompleteIntervals{Meta: meta, Model: "sushi.orders", Version: "v.1", Ranges: hour}, "version", ""},
		{"restate sushi.orders", &Restate{Meta: meta, Env: "prod", Model: "sushi.orders", Ranges: hour}, "", ""},
		{"restate a.b.c", &Restate{Meta: meta, Env: "prod", Model: "a.b.c", Ranges: hour}, "model", ""},
		{"retire sushi.orders's table", &RetireTables{Meta: meta, Tables: []string{"sushi.orders@v1"}, GraceMS: MinRetireGrace.Milliseconds()}, "", ""},
		{"retire a.b.c's table", &RetireTables{Meta: meta, Tables: []string{"a.b.c@v1"}, GraceMS: MinRetireGrace.Milliseconds()}, "tables[0]", ""},
		{"restate without id", &Restate{Env: "prod", Model: "events", Ranges: hour}, "id", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cmd.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, ErrRejected) {
				t.Fatalf("want *Error on %q, got %v", c.field, err)
			}
			if ce.Code != CodeInvalid || ce.Field != c.field || !strings.Contains(ce.Message, c.msg) {
				t.Fatalf("got %s on %q (%s), want invalid on %q containing %q", ce.Code, ce.Field, ce.Message, c.field, c.msg)
			}
		})
	}
}
