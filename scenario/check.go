package scenario

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// check evaluates a step's expectations against what it observed.
func (r *runner) check(ctx context.Context, st Step, sr *StepResult) []Failure {
	e := st.Expect
	if e == nil {
		return nil
	}
	var fails []Failure
	fail := func(key, want, got string) {
		fails = append(fails, Failure{Step: st.Num, Key: key, Want: want, Got: got})
	}
	d := sr.decision
	if e.Outcome != nil {
		got := "<no decision in this step>"
		if d != nil {
			got = string(d.Outcome)
		}
		if got != *e.Outcome {
			fail("outcome", *e.Outcome, got)
		}
	}
	if e.Codes != nil {
		have := sr.Codes
		for _, c := range e.Codes {
			if !slices.Contains(have, c) {
				fail("codes", fmt.Sprintf("%s present", c), fmt.Sprintf("%v", orEmpty(have)))
			}
		}
	}
	for _, m := range slices.Sorted(maps.Keys(e.Missing)) {
		want := interval.NewSet(e.Missing[m]...)
		var got interval.Set
		if d != nil {
			got = interval.NewSet(d.Models[m].Missing...)
		}
		if d == nil || !want.Equal(got) {
			fail("missing."+m, fmt.Sprint(orEmpty(want.Strings())), gotOrNone(d, fmt.Sprint(orEmpty(got.Strings()))))
		}
	}
	for _, m := range slices.Sorted(maps.Keys(e.Advances)) {
		got := 0
		if d != nil {
			got = d.Models[m].Advances
		}
		if d == nil || got != e.Advances[m] {
			fail("advances."+m, fmt.Sprint(e.Advances[m]), gotOrNone(d, fmt.Sprint(got)))
		}
	}
	for _, m := range slices.Sorted(maps.Keys(e.Scheduled)) {
		want, got := interval.NewSet(e.Scheduled[m]...), sr.sched[m]
		if !want.Equal(got) {
			fail("scheduled."+m, fmt.Sprint(orEmpty(want.Strings())), fmt.Sprint(orEmpty(got.Strings())))
		}
	}
	if e.RepairsOpen != nil && sr.RepairsOpen != *e.RepairsOpen {
		fail("repairs_open", fmt.Sprint(*e.RepairsOpen), fmt.Sprint(sr.RepairsOpen))
	}
	if e.Divergences != nil {
		n := 0
		if sr.Divergences != nil {
			n = *sr.Divergences
		} else if divs, err := r.verify(ctx); err != nil {
			fail("divergences", fmt.Sprint(*e.Divergences), "error: "+err.Error())
			n = -1
		} else {
			n = len(divs)
			sr.divs = divs
		}
		if n >= 0 && n != *e.Divergences {
			var parts []string
			for _, dv := range sr.divs {
				parts = append(parts, dv.String())
			}
			fail("divergences", fmt.Sprint(*e.Divergences), fmt.Sprintf("%d (%s)", n, strings.Join(parts, "; ")))
		}
	}
	if e.VerifyDiffs != nil {
		want := fmt.Sprint(*e.VerifyDiffs)
		switch {
		case r.wh == nil:
			fail("verify.diffs", want, "<no warehouse: run with --warehouse>")
		case len(sr.Verify) == 0:
			fail("verify.diffs", want, "<nothing verified: the env serves no SQL model>")
		default:
			n, parts := verifyDiffs(sr.Verify)
			if n != int64(*e.VerifyDiffs) {
				fail("verify.diffs", want, fmt.Sprintf("%d (%s)", n, strings.Join(parts, "; ")))
			}
		}
	}
	if len(e.Incumbent) > 0 {
		env := sr.Env
		if env == "" {
			env = r.env
		}
		var inc map[string]string
		r.eng.Projection().Read(func(s *projections.State) {
			inc = map[string]string{}
			for m, id := range s.Env(env).Incumbents {
				_, v, _ := events.ParseSnapshotID(id)
				inc[m] = v
			}
		})
		for _, m := range slices.Sorted(maps.Keys(e.Incumbent)) {
			got, ok := inc[m]
			if !ok {
				got = "<none>"
			}
			if got != e.Incumbent[m] {
				fail("incumbent."+m, e.Incumbent[m], got)
			}
		}
	}
	sort.SliceStable(fails, func(i, j int) bool { return fails[i].Key < fails[j].Key })
	return fails
}

// verifyDiffs sums the differing rows of every model, and describes each
// model's diff.
func verifyDiffs(diffs map[string]warehouse.Diff) (int64, []string) {
	var n int64
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(diffs)) {
		d := diffs[m]
		n += d.OnlyInView + d.OnlyInRecompute
		part := fmt.Sprintf("%s: %d only in the view, %d only in the recompute", m, d.OnlyInView, d.OnlyInRecompute)
		if d.Unverifiable > 0 {
			part += fmt.Sprintf(", %d recorded intervals not recomputed (their writer read a retired table)", d.Unverifiable)
		}
		if d.Unrecorded > 0 {
			part += fmt.Sprintf(", %d intervals without a writer record checked against the incumbent's query", d.Unrecorded)
		}
		parts = append(parts, part)
	}
	return n, parts
}

func gotOrNone(d *events.PromotionDecided, s string) string {
	if d == nil {
		return "<no decision in this step>"
	}
	return s
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
