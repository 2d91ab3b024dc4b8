package integration

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/scenario"
)

// scenarioRecords plays a scenario file and reads its stream back.
func scenarioRecords(t *testing.T, file string) []events.Record {
	t.Helper()
	f, err := scenario.Load("../testdata/scenarios/" + file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := scenario.Run(t.Context(), f, scenario.Options{DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(jstest.Node(t, natsnode.Config{DataDir: dir}).Conn())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := jstest.ReadLog(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func fields(divs []replay.Divergence) string {
	var out []string
	for _, d := range divs {
		out = append(out, d.Field)
	}
	return strings.Join(out, ",")
}

// Re-evaluating an untouched history reproduces every decision and
// catch-up request; a tampered record, or a tampered fact it was based on,
// is reported naming the field.
func TestVerifyDetectsTampering(t *testing.T) {
	recs := scenarioRecords(t, "catch-up-then-allowance.yaml")
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("untouched history diverges: %v", divs)
	}
	find := func(match func(events.Payload) bool) int {
		for i, r := range recs {
			if match(r.Event.Payload) {
				return i
			}
		}
		t.Fatal("record not found")
		return -1
	}
	decision := find(func(p events.Payload) bool { d, ok := p.(events.PromotionDecided); return ok && d.Plan == "p1" })
	request := find(func(p events.Payload) bool { _, ok := p.(events.CatchUpRequested); return ok })
	fill := find(func(p events.Payload) bool {
		c, ok := p.(events.IntervalsCompleted)
		return ok && c.RunKind == events.RunCatchUp
	})

	cases := []struct {
		name   string
		tamper func(rs []events.Record)
		want   string
	}{
		{"outcome", func(rs []events.Record) {
			d := rs[decision].Event.Payload.(events.PromotionDecided)
			d.Outcome = events.Rejected
			rs[decision].Event.Payload = d
		}, "outcome"},
		{"finding sentence", func(rs []events.Record) {
			d := rs[decision].Event.Payload.(events.PromotionDecided)
			d.Findings = append([]events.Finding(nil), d.Findings...)
			d.Findings[0].Message = "all fine"
			rs[decision].Event.Payload = d
		}, "findings"},
		{"catch-up work", func(rs []events.Record) {
			r := rs[request].Event.Payload.(events.CatchUpRequested)
			r.Work = append([]events.CatchUpWork(nil), r.Work...)
			r.Work[0].Ranges = []interval.Range{interval.R(r.Work[0].Ranges[0].Start, r.Work[0].Ranges[0].End.Add(3600e9))}
			rs[request].Event.Payload = r
		}, "work.events.ranges"},
		{"the catch-up backfill never happened", func(rs []events.Record) {
			c := rs[fill].Event.Payload.(events.IntervalsCompleted)
			c.Ranges = nil
			rs[fill].Event.Payload = c
		}, "models.events.missing"},
	}
	for _, c := range cases {
		rs := append([]events.Record(nil), recs...)
		c.tamper(rs)
		divs := replay.Verify(rs)
		if !strings.Contains(","+fields(divs)+",", ","+c.want+",") {
			t.Errorf("%s: divergences %q, want one on %s", c.name, fields(divs), c.want)
		}
	}
}
