package decide

import (
	"maps"
	"testing"

	"github.com/tidemark/tidemark/commands"
)

// build_plan's changed: each model's latest version a user registered,
// unless the env serves it or a version derived from it; derived versions
// never chosen; nothing changed appends nothing.
func TestPlanChanged(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, model{name: "rollup", deps: []string{"events"}})
	if got := Changed(w.st, "prod"); len(got) != 0 {
		t.Fatalf("right after deploy: changed %v, want none", got)
	}
	seq := w.st.Seq
	d := w.must(&commands.BuildPlan{Plan: "p0", Env: "prod", Changed: true}, h(7))
	if len(d.Events) != 0 || d.Reply.Plan != nil || w.st.Seq != seq || d.Reply.Message == "" {
		t.Fatalf("nothing changed: want a message and no events, got %+v", d)
	}
	w.refused(&commands.BuildPlan{Plan: "p0", Env: "prod", Changed: true, Versions: map[string]string{"events": "v1"}}, h(7), commands.CodeInvalid)

	w.register(model{name: "events", version: "v2"}.command())
	w.register(model{name: "fresh"}.command())
	want := map[string]string{"events": "v2", "fresh": "v1"}
	if got := Changed(w.st, "prod"); !maps.Equal(got, want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
	d = w.must(&commands.BuildPlan{Plan: "p1", Env: "prod", Changed: true}, h(7))
	if d.Reply.Plan == nil {
		t.Fatalf("no plan built: %+v", d.Reply)
	}
	got := map[string]string{}
	for _, c := range d.Reply.Plan.Candidates {
		got[c.Model] = c.Snapshot
	}
	// rollup is downstream of events: derived, not set.
	if got["events"] != "events@v2" || got["fresh"] != "fresh@v1" || got["rollup"] != "rollup@v1+p1" {
		t.Fatalf("candidates %v", got)
	}
	// Another env serves nothing: every model is changed there, with its
	// latest user version (never the derived v1+p1).
	if got := Changed(w.st, "dev"); !maps.Equal(got, map[string]string{"events": "v2", "fresh": "v1", "rollup": "v1"}) {
		t.Fatalf("dev: changed %v", got)
	}
}
