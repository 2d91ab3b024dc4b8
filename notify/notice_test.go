package notify

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func hr(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

// fold is a state folded from payloads, each at hr(0).
func fold(t *testing.T, ps ...events.Payload) *projections.State {
	t.Helper()
	st, ids := projections.New(), events.NewIDSource()
	for i, p := range ps {
		if err := projections.Apply(st, uint64(i+1), events.New(ids, hr(0), p)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// prod is env prod serving events@v1 and its downstream agg@v1 (hourly,
// from t0), each covering [t0, hr(cover)); events' last run failed
// (final) when failed is set.
func prod(t *testing.T, cover int, failed bool) *projections.State {
	reg := func(model string, deps ...string) events.SnapshotRegistered {
		return events.SnapshotRegistered{Snapshot: model + "@v1", Model: model, Version: "v1", Cron: "0 * * * *", Unit: interval.Hour,
			Start: t0, Kind: events.Incremental, Table: model + "@v1", DependsOn: deps}
	}
	ps := []events.Payload{reg("events"), reg("agg", "events"),
		events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v1", Table: "events@v1"}, {Model: "agg", Snapshot: "agg@v1", Table: "agg@v1"}}},
		events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1,
			Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v1"}, "agg": {Snapshot: "agg@v1"}}},
		events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{interval.R(t0, hr(cover))}},
		events.IntervalsCompleted{Snapshot: "agg@v1", Table: "agg@v1", Ranges: []interval.Range{interval.R(t0, hr(cover))}},
	}
	if failed {
		ps = append(ps, events.RunFailed{Snapshot: "events@v1", Ranges: []interval.Range{interval.R(hr(cover), hr(cover+1))}, RunKind: events.RunScheduled,
			Error: "exit status 3", Attempt: 3, Final: true})
	}
	return fold(t, ps...)
}

// TestLate: an incumbent is late when what it computed ends more than one
// interval of its unit before what is ready at the clock: one interval
// behind is not late; a downstream model says its upstream is late, an
// incumbent whose work was given up says the failure.
func TestLate(t *testing.T) {
	for _, c := range []struct {
		name     string
		cover    int
		now      time.Time
		failed   bool
		late     bool
		reasonEv string
		reasonAg string
	}{
		{name: "up to date", cover: 10, now: hr(10).Add(30 * time.Minute)},
		{name: "one interval behind", cover: 10, now: hr(11).Add(59 * time.Minute)},
		{name: "two intervals behind", cover: 10, now: hr(12), late: true, reasonAg: "upstream_late"},
		{name: "given up", cover: 10, now: hr(13), failed: true, late: true, reasonEv: "failed", reasonAg: "upstream_late"},
		{name: "given up, on time", cover: 10, now: hr(11), failed: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ls := Late(prod(t, c.cover, c.failed), c.now, false)
			if len(ls) != 2 || ls[0].Model != "agg" || ls[1].Model != "events" {
				t.Fatalf("want agg then events, got %+v", ls)
			}
			for i, want := range []string{c.reasonAg, c.reasonEv} {
				l := ls[i]
				if l.Late != c.late || l.Cause != want || !l.Frontier.Equal(hr(c.cover)) || l.Env != "prod" || l.Snapshot != l.Model+"@v1" {
					t.Errorf("%s: %+v, want late %v cause %q", l.Model, l, c.late, want)
				}
				if want == "failed" && !strings.Contains(l.Reason, "exit status 3") {
					t.Errorf("%s: reason %q does not say the failure", l.Model, l.Reason)
				}
			}
		})
	}
	// Covering nothing, the frontier is the start.
	st := fold(t, events.SnapshotRegistered{Snapshot: "e@v1", Model: "e", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: hr(1), Kind: events.Incremental, Table: "e@v1"},
		events.PlanBuilt{Plan: "p1", Env: "dev", Candidates: []events.Candidate{{Model: "e", Snapshot: "e@v1", Table: "e@v1"}}},
		events.PromotionDecided{Plan: "p1", Env: "dev", Outcome: events.Accepted, Generation: 1, Models: map[string]events.ModelFinding{"e": {Snapshot: "e@v1"}}})
	// With no live worker, a late model with no other cause says so; a
	// model on time, or one with a cause, keeps its own.
	for _, c := range []struct {
		failed bool
		now    time.Time
		ag, ev string
	}{{false, hr(12), "upstream_late", "no_worker"}, {true, hr(13), "upstream_late", "failed"}, {false, hr(11), "", ""}} {
		ls := Late(prod(t, 10, c.failed), c.now, true)
		if ls[0].Cause != c.ag || ls[1].Cause != c.ev {
			t.Errorf("no worker, failed %v at %s: causes %q, %q; want %q, %q", c.failed, c.now, ls[0].Cause, ls[1].Cause, c.ag, c.ev)
		}
		if c.ev == "no_worker" && !strings.Contains(ls[1].Reason, "no worker heartbeat") {
			t.Errorf("no worker: reason %q", ls[1].Reason)
		}
	}
	if ls := Late(st, hr(4), false); len(ls) != 1 || !ls[0].Late || !ls[0].Frontier.Equal(hr(1)) || !ls[0].Ready.Equal(hr(4)) {
		t.Fatalf("empty: %+v", ls)
	}
}

// TestOf: decisions and work given up make notices with stable keys (an
// event in a group message keyed by its index too); a failure tried again
// and other events make none.
func TestOf(t *testing.T) {
	ids := events.NewIDSource()
	rec := func(seq uint64, index, count int, p events.Payload) events.Record {
		return events.Record{Seq: seq, Index: index, Count: count, Event: events.New(ids, hr(2), p)}
	}
	failed := events.RunFailed{Snapshot: "sushi.orders@v1", RunKind: events.RunBackfill, RunID: "backfill:p1", Error: "exit status 3", Attempt: 2, Final: true}
	n := Of(rec(9, 1, 3, failed), "http://dash/")
	if n == nil || n.Key != "tidemark-9-1" || n.Seq != 9 || n.Index != 1 || n.Kind != KindWorkFailed || n.Model != "sushi.orders" || n.Plan != "p1" ||
		n.Link != "http://dash/plans/p1" || !n.Time.Equal(hr(2)) {
		t.Fatalf("failed work: %+v", n)
	}
	failed.Final = false
	if n := Of(rec(10, 0, 0, failed), ""); n != nil {
		t.Fatalf("a failure tried again made a notice: %+v", n)
	}
	n = Of(rec(11, 0, 0, events.PromotionDecided{Plan: "p2", Env: "prod", Outcome: events.Rejected, Codes: []string{"historical_gap"},
		Findings: []events.Finding{{Code: "historical_gap", Message: "events@v2 misses 01:00/02:00"}}}), "")
	if n == nil || n.Key != "tidemark-11" || n.Outcome != "rejected" || n.Link != "" || !strings.Contains(n.Message, "REJECTED [historical_gap]; events@v2 misses 01:00/02:00") {
		t.Fatalf("rejection: %+v", n)
	}
	b, _ := json.Marshal(n)
	for _, field := range []string{`"kind":"promotion_decided"`, `"key":"tidemark-11"`, `"seq":11`, `"time":`, `"env":"prod"`, `"plan":"p2"`, `"outcome":"rejected"`, `"codes":["historical_gap"]`, `"message":`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("the document lacks %s: %s", field, b)
		}
	}
	if n := Of(rec(12, 0, 0, events.EnvironmentRolledBack{Env: "prod", ToGeneration: 1, Generation: 3}), ""); n == nil || n.Kind != KindRollback || n.Env != "prod" {
		t.Fatalf("rollback: %+v", n)
	}
	if n := Of(rec(13, 0, 0, events.IntervalsCompleted{Snapshot: "e@v1"}), ""); n != nil {
		t.Fatalf("a completion made a notice: %+v", n)
	}
}

// Lateness keys are unique: names may hold '-', so the env and the
// snapshot are set apart by what no name holds ("a-b" serving c@v1 and
// "a" serving b-c@v1, late at one frontier, are two notices).
func TestLatenessKeyUnique(t *testing.T) {
	f := hr(3)
	k1 := latenessNotice(Lateness{Env: "a-b", Model: "c", Snapshot: "c@v1", Frontier: f, Ready: hr(5), Late: true}, 7, hr(5), "").Key
	k2 := latenessNotice(Lateness{Env: "a", Model: "b-c", Snapshot: "b-c@v1", Frontier: f, Ready: hr(5), Late: true}, 7, hr(5), "").Key
	if k1 == k2 {
		t.Errorf("two incumbents' lateness notices share the key %s", k1)
	}
	if want := "tidemark-late-a-b/c@v1/" + strconv.FormatInt(f.Unix(), 10); k1 != want {
		t.Errorf("key %s, want %s", k1, want)
	}
}

// A rejection's message names its first MaxMessageFindings findings and
// counts the rest: a plan of many models made one message per model,
// a document an endpoint may refuse for its size (and a refusal is not
// sent again).
func TestOfManyFindings(t *testing.T) {
	var fs []events.Finding
	for i := range 500 {
		fs = append(fs, events.Finding{Code: "historical_gap", Message: fmt.Sprintf("m%03d@v2 misses 01:00/02:00", i)})
	}
	n := Of(events.Record{Seq: 5, Event: events.New(events.NewIDSource(), hr(2), events.PromotionDecided{Plan: "p", Env: "prod",
		Outcome: events.Rejected, Codes: []string{"historical_gap"}, Findings: fs})}, "")
	if n == nil || !strings.Contains(n.Message, "m000@v2 misses") || strings.Contains(n.Message, fmt.Sprintf("m%03d@", MaxMessageFindings)) ||
		!strings.Contains(n.Message, fmt.Sprintf("and %d more findings", 500-MaxMessageFindings)) {
		t.Fatalf("message (%d bytes): %.400s", len(n.Message), n.Message)
	}
}
