package decide

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/replay"
)

// The audits of events v2 in these tests: a blocking not_null and a
// non-blocking number_of_rows.
var v2Audits = []models.Audit{
	{Name: "ids", Kind: models.AuditNotNull, Columns: []string{"id"}},
	{Name: "rows", Kind: models.AuditNumberOfRows, Threshold: 1, NonBlocking: true},
}

func failed(audit string, count int64) events.AuditOutcome {
	return events.AuditOutcome{Audit: audit, Count: count, Columns: []string{"id"}, Sample: [][]string{{""}}}
}

func passed(audit string) events.AuditOutcome { return events.AuditOutcome{Audit: audit, Passed: true} }

// audited completes ranges of a snapshot reporting the outcomes given.
func (w *world) audited(snapshot string, at time.Time, os []events.AuditOutcome, r ...interval.Range) Decision {
	w.tb.Helper()
	m, v, _ := events.ParseSnapshotID(snapshot)
	return w.must(&commands.CompleteIntervals{Model: m, Version: v, Ranges: r, RunKind: events.RunBackfill, Audits: os}, at)
}

// audits: events v1 deployed at 06:00 and scheduled until 10:00; events v2
// declares v2Audits; strict plan p1 setting it is built at 10:00 (its
// backfill set [00:00, 10:00)). Nothing is backfilled.
func audits(t *testing.T) *world {
	t.Helper()
	w := deployed(t, h(6), model{name: "events"})
	w.run("prod", h(6), h(10))
	c := model{name: "events", version: "v2"}.command()
	c.Audits = v2Audits
	w.register(c)
	w.plan("p1", "prod", map[string]string{"events": "v2"}, h(10))
	return w
}

// A completion with audits appends its IntervalsCompleted, then one
// AuditRecorded per outcome in the order reported, each blocking as the
// definition says (not as the worker might), in one append on the
// snapshot's subject.
func TestCompletionRecordsAudits(t *testing.T) {
	w := audits(t)
	dec := w.audited("events@v2", h(10), []events.AuditOutcome{passed("rows"), failed("ids", 3)}, hrs(0, 5))
	if len(dec.Events) != 3 {
		t.Fatalf("%d events: %+v", len(dec.Events), dec.Events)
	}
	ic, ok := dec.Events[0].(events.IntervalsCompleted)
	if !ok {
		t.Fatalf("first event %T", dec.Events[0])
	}
	for i, want := range []struct {
		audit    string
		blocking bool
		passed   bool
	}{{"rows", false, true}, {"ids", true, false}} {
		a, ok := dec.Events[1+i].(events.AuditRecorded)
		if !ok || a.Audit != want.audit || a.Blocking != want.blocking || a.Passed != want.passed || a.Snapshot != "events@v2" ||
			a.Table != ic.Table || !slices.Equal(a.Ranges, ic.Ranges) || a.Subject() != ic.Subject() {
			t.Fatalf("event %d: %+v", 1+i, dec.Events[1+i])
		}
	}
	if a := dec.Events[2].(events.AuditRecorded); a.Count != 3 || a.Sample[0][0] != "" {
		t.Fatalf("the outcome is not recorded as reported: %+v", a)
	}
	if len(dec.Expect.Subjects) != 1 || dec.Expect.LastSeq == nil {
		t.Fatalf("expect %+v", dec.Expect)
	}
	golden(t, "completion_with_audits", dec)
}

// An outcome naming an audit the snapshot does not declare is refused on
// audits[i].audit and appends nothing: nor does any outcome of a version
// without audits.
func TestCompletionRefusesUndeclaredAudit(t *testing.T) {
	w := audits(t)
	ce := w.refused(&commands.CompleteIntervals{Model: "events", Version: "v2", Ranges: []interval.Range{hrs(0, 5)},
		Audits: []events.AuditOutcome{passed("rows"), passed("not_null")}}, h(10), commands.CodeInvalid)
	if ce.Field != "audits[1].audit" || !strings.Contains(ce.Message, "declares ids, rows") {
		t.Fatalf("%+v", ce)
	}
	ce = w.refused(&commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{hrs(0, 1)},
		Audits: []events.AuditOutcome{passed("rows")}}, h(10), commands.CodeInvalid)
	if ce.Field != "audits[0].audit" || !strings.Contains(ce.Message, "declares none") {
		t.Fatalf("%+v", ce)
	}
	// check_work asks the same question and gets the same refusal.
	_, err := Decide(w.st, &commands.CheckWork{CompleteWork: commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{
		Meta: commands.Meta{ID: "q", At: h(10)}, Model: "events", Version: "v2", Ranges: []interval.Range{hrs(0, 5)},
		Audits: []events.AuditOutcome{passed("nope")}}}})
	if err == nil || !strings.Contains(err.Error(), "declares no such audit") {
		t.Fatalf("check_work: %v", err)
	}
}

func findingOf(t *testing.T, pd events.PromotionDecided, code string) events.Finding {
	t.Helper()
	for _, f := range pd.Findings {
		if f.Code == code {
			return f
		}
	}
	t.Fatalf("no %s finding in %+v", code, pd.Findings)
	return events.Finding{}
}

// A failed blocking audit on a range of the check window rejects the
// candidate audit_failed, naming the model, the audit, the ranges and the
// count; the next batch that passes (another range) does not hide it;
// recomputing the failed range with a pass clears it.
func TestAuditFailedRejects(t *testing.T) {
	w := audits(t)
	w.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 3), passed("rows")}, hrs(0, 5))
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids"), passed("rows")}, hrs(5, 10))
	dec := w.promote("p1", h(10))
	pd := *dec.Reply.Decision
	if pd.Outcome != events.Rejected || !slices.Equal(pd.Codes, []string{"audit_failed"}) {
		t.Fatalf("%s %v", pd.Outcome, pd.Codes)
	}
	f := findingOf(t, pd, "audit_failed")
	if f.Model != "events" || f.Snapshot != "events@v2" || f.Audit != "ids" || f.Count != 3 ||
		!interval.NewSet(f.Ranges...).Equal(rs(hrs(0, 5))) || !strings.Contains(f.Message, "blocking audit ids failed on 2026-12-01T00:00:00Z/2026-12-01T05:00:00Z") {
		t.Fatalf("finding %+v", f)
	}
	golden(t, "audit_failed_rejected", dec)

	// Recomputed, and this time it passes: the range's latest result counts.
	w.audited("events@v2", h(10).Add(10*time.Minute), []events.AuditOutcome{passed("ids"), passed("rows")}, hrs(0, 5))
	if pd := w.decided("p1", h(10).Add(10*time.Minute)); pd.Outcome != events.Accepted || !slices.Equal(pd.Codes, []string{"no_gaps"}) {
		t.Fatalf("after the recompute: %s %v", pd.Outcome, pd.Codes)
	}
}

// Only the failed part recomputed clears only that part.
func TestAuditPartialRecompute(t *testing.T) {
	w := audits(t)
	w.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 7)}, hrs(0, 10))
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids")}, hrs(0, 4))
	pd := w.decided("p1", h(10))
	if f := findingOf(t, pd, "audit_failed"); !interval.NewSet(f.Ranges...).Equal(rs(hrs(4, 10))) || f.Count != 7 {
		t.Fatalf("finding %+v", f)
	}
}

// A failed non-blocking audit warns audit_warning on an accepted decision
// (and on a rejected one).
func TestAuditWarning(t *testing.T) {
	w := audits(t)
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids"), {Audit: "rows", Count: 0, Error: "timed out after 30s"}}, hrs(0, 10))
	dec := w.promote("p1", h(10))
	pd := *dec.Reply.Decision
	if pd.Outcome != events.Accepted || !slices.Equal(pd.Codes, []string{"audit_warning", "no_gaps"}) {
		t.Fatalf("%s %v", pd.Outcome, pd.Codes)
	}
	if f := findingOf(t, pd, "audit_warning"); f.Audit != "rows" || !strings.Contains(f.Message, "could not run: timed out after 30s") {
		t.Fatalf("finding %+v", f)
	}
	golden(t, "audit_warning_accepted", dec)

	w2 := audits(t)
	w2.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 1), failed("rows", 0)}, hrs(0, 10))
	if pd := w2.decided("p1", h(10)); pd.Outcome != events.Rejected || !slices.Equal(pd.Codes, []string{"audit_failed", "audit_warning"}) {
		t.Fatalf("both: %s %v", pd.Outcome, pd.Codes)
	}
}

// Coverage is judged first: a candidate rejected on coverage also lists a
// failed blocking audit of its window, with its missing ranges.
func TestAuditFailedWithCoverage(t *testing.T) {
	w := audits(t)
	w.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 2)}, hrs(0, 5))
	pd := w.decided("p1", h(10))
	if pd.Outcome != events.Rejected || !slices.Equal(pd.Codes, []string{"audit_failed", "missing_intervals"}) ||
		!interval.NewSet(pd.Models["events"].Missing...).Equal(rs(hrs(5, 10))) {
		t.Fatalf("%s %v %v", pd.Outcome, pd.Codes, pd.Models["events"].Missing)
	}
}

// Only the check window counts: a failure past the incumbent's frontier
// is not judged, and a failure of another snapshot is not this one's.
func TestAuditOutsideWindow(t *testing.T) {
	w := audits(t)
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids")}, hrs(0, 10))
	w.audited("events@v2", h(11), []events.AuditOutcome{failed("ids", 1)}, hrs(10, 11))
	if pd := w.decided("p1", h(11)); pd.Outcome != events.Accepted {
		t.Fatalf("%s %v", pd.Outcome, pd.Codes)
	}
}

// Nothing is promoted empty, nor with a failed audit: with no incumbent
// the window is the candidate's backfill set.
func TestAuditNoIncumbent(t *testing.T) {
	w := newWorld(t)
	c := model{name: "events"}.command()
	c.Audits = v2Audits
	w.register(c)
	w.plan("p1", "prod", map[string]string{"events": "v1"}, h(6))
	w.audited("events@v1", h(6), []events.AuditOutcome{failed("ids", 4)}, hrs(2, 3))
	w.audited("events@v1", h(6), []events.AuditOutcome{passed("ids")}, hrs(0, 2), hrs(3, 6))
	pd := w.decided("p1", h(6))
	if pd.Outcome != events.Rejected || !slices.Equal(pd.Codes, []string{"audit_failed"}) {
		t.Fatalf("%s %v", pd.Outcome, pd.Codes)
	}
	if f := findingOf(t, pd, "audit_failed"); !interval.NewSet(f.Ranges...).Equal(rs(hrs(2, 3))) {
		t.Fatalf("finding %+v", f)
	}
}

// A derived version keeps its base's audits: a plan changing the parent
// derives the child with them, so the child's completions may report them.
func TestDerivedVersionKeepsAudits(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	child := model{name: "sessions", deps: []string{"events"}}.command()
	child.Audits = v2Audits
	w.register(child)
	w.deploy("prod", "deploy", map[string]string{"events": "v1", "sessions": "v1"}, h(2))
	w.hourly("events", "v2")
	w.plan("p1", "prod", map[string]string{"events": "v2"}, h(2))
	sn := w.st.Snapshots["sessions@v1+p1"]
	if sn == nil || len(sn.Audits) != 2 || sn.Audits[1].Name != "rows" || !sn.Audits[1].NonBlocking {
		t.Fatalf("derived %+v", sn)
	}
	if sn.Fingerprint == models.Fingerprint(func() events.SnapshotRegistered { r := sn.SnapshotRegistered; r.Audits = nil; return r }()) {
		t.Fatal("the derived version's fingerprint leaves its audits out")
	}
	w.audited("sessions@v1+p1", h(2), []events.AuditOutcome{failed("ids", 1)}, hrs(0, 2))
}

// Replay re-evaluates the decisions from the log and gets the audit codes
// again; a log whose failing result is turned into a pass diverges (the
// codes come from the AuditRecorded events, nothing else).
func TestAuditReplay(t *testing.T) {
	w := audits(t)
	w.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 3), failed("rows", 0)}, hrs(0, 5))
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids"), passed("rows")}, hrs(5, 10))
	if pd := w.decided("p1", h(10)); !slices.Equal(pd.Codes, []string{"audit_failed", "audit_warning"}) {
		t.Fatalf("%v", pd.Codes)
	}
	w.audited("events@v2", h(11), []events.AuditOutcome{passed("ids"), passed("rows")}, hrs(0, 5))
	if pd := w.decided("p1", h(11)); !slices.Equal(pd.Codes, []string{"no_gaps"}) {
		t.Fatalf("%v", pd.Codes)
	}
	recs := make([]events.Record, len(w.log))
	for i, ev := range w.log {
		recs[i] = events.Record{Seq: uint64(i + 1), Subject: ev.Payload.Subject(), Event: ev}
	}
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("divergences: %v", divs)
	}
	var rows []string
	for _, r := range replay.Audit(recs, replay.Filter{Model: "events"}) {
		if r.Type == string(events.TypeAuditRecorded) {
			rows = append(rows, r.Summary)
		}
	}
	if len(rows) != 6 || rows[0] != "events@v2 blocking audit ids failed over [2026-12-01T00:00:00Z/2026-12-01T05:00:00Z]: 3 violating rows" ||
		rows[1] != "events@v2 non-blocking audit rows failed over [2026-12-01T00:00:00Z/2026-12-01T05:00:00Z]: 0 violating rows" {
		t.Fatalf("audit rows %q", rows)
	}
	// audit explain of the first decision shows the failed audits it saw.
	var first int
	for i, r := range recs {
		if pd, ok := r.Event.Payload.(events.PromotionDecided); ok && pd.Plan == "p1" {
			first = i
			break
		}
	}
	x, err := replay.Explain(recs[:first+1], "p1")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(x.Views[0].FailedAudits); got != "[ids (blocking) on [2026-12-01T00:00:00Z/2026-12-01T05:00:00Z]: 3 violating rows rows (non-blocking) on [2026-12-01T00:00:00Z/2026-12-01T05:00:00Z]: 0 violating rows]" {
		t.Fatalf("explain: %s", got)
	}
	// The failing result made a pass: the first decision no longer follows.
	tampered := slices.Clone(recs)
	for i, r := range tampered {
		if a, ok := r.Event.Payload.(events.AuditRecorded); ok && a.Audit == "ids" && !a.Passed {
			a.Passed, a.Count = true, 0
			tampered[i].Event.Payload = a
			break
		}
	}
	divs := replay.Verify(tampered)
	if len(divs) == 0 || !strings.Contains(fmt.Sprint(divs), "audit_failed") {
		t.Fatalf("tampered log: %v", divs)
	}
}

// The strict retry after catch-up judges audits too: a caught-up suffix
// whose batch failed a blocking audit rejects the plan audit_failed.
func TestAuditFailedAfterCatchUp(t *testing.T) {
	c := model{name: "events"}.command()
	c.Audits = v2Audits
	w := standard(t, &model{name: "events"}, []int{0, 1})
	// standard registered v2 without audits: this test's v3 has them.
	c.Version = "v3"
	w.register(c)
	w.plan("p3", "prod", map[string]string{"events": "v3"}, h(10), 0, 1)
	w.audited("events@v3", h(10), []events.AuditOutcome{passed("ids")}, hrs(0, 10))
	w.tick("prod", h(11))
	dec := w.promote("p3", at1107)
	req := dec.Reply.CatchUp
	if req == nil {
		t.Fatalf("want a catch-up request, got %+v", dec.Reply.Decision)
	}
	m, v, _ := events.ParseSnapshotID("events@v3")
	for _, wk := range Outstanding(w.st, *req) {
		w.must(&commands.CompleteIntervals{Model: m, Version: v, Ranges: wk.Ranges, RunKind: events.RunCatchUp,
			Audits: []events.AuditOutcome{failed("ids", 5)}}, at1107)
	}
	pd := w.decided("p3", h(11).Add(10*time.Minute))
	if pd.Outcome != events.Rejected || !slices.Equal(pd.Codes, []string{"audit_failed"}) || pd.CatchUpSeq == 0 {
		t.Fatalf("retry: %s %v (catch-up seq %d)", pd.Outcome, pd.Codes, pd.CatchUpSeq)
	}
	if f := findingOf(t, pd, "audit_failed"); !interval.NewSet(f.Ranges...).Equal(rs(hrs(10, 11))) || f.Count != 5 {
		t.Fatalf("finding %+v", f)
	}
}

// replay --verify compares an audit finding's own keys, audit and count,
// not only its message: a log whose finding says another count (or
// audit) than the rule gives diverges, whatever its message says.
func TestAuditReplayComparesFindingKeys(t *testing.T) {
	for _, doctor := range []func(*events.Finding){
		func(f *events.Finding) { f.Count = 4 },
		func(f *events.Finding) { f.Audit = "rows" },
	} {
		w := audits(t)
		w.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 3), passed("rows")}, hrs(0, 10))
		w.decided("p1", h(10))
		recs := w.records()
		doctored := false
		for i := range recs {
			pd, ok := recs[i].Event.Payload.(events.PromotionDecided)
			if !ok {
				continue
			}
			pd.Findings = slices.Clone(pd.Findings)
			for j := range pd.Findings {
				if pd.Findings[j].Code == "audit_failed" {
					doctor(&pd.Findings[j])
					doctored = true
				}
			}
			recs[i].Event.Payload = pd
		}
		if divs := replay.Verify(recs); !doctored || len(divs) == 0 || divs[0].Field != "findings" {
			t.Fatalf("doctored %v; divergences %v", doctored, divs)
		}
	}
}
