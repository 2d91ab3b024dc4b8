package decide

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// churn is prod with model a and children downstream of it, after plans
// promotions of a new version of a each (every plan: a and a derived
// version of each child). It returns the world and its events.
func churn(b *testing.B, children, plans int) *world {
	b.Helper()
	ms := []model{{name: "a"}}
	for i := 0; i < children; i++ {
		ms = append(ms, model{name: fmt.Sprintf("c%03d", i), deps: []string{"a"}})
	}
	w := deployed(b, h(1), ms...)
	for p := 0; p < plans; p++ {
		v := fmt.Sprintf("v%d", p+2)
		w.hourly("a", v)
		id := fmt.Sprintf("p%d", p)
		w.plan(id, "prod", map[string]string{"a": v}, h(2))
		w.backfill(id, h(2))
		if pd := w.decided(id, h(2)); pd.Outcome != events.Accepted {
			b.Fatalf("%s: %s %v", id, pd.Outcome, pd.Codes)
		}
	}
	return w
}

// BenchmarkRetirable: the rule over a state of 500 accepted plans of 20
// candidates each (10,000 snapshot tables, 9,980 retirable).
func BenchmarkRetirable(b *testing.B) {
	w := churn(b, 19, 500)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n := len(Retirable(w.st, day(30), 24*time.Hour, 24*time.Hour)); n != 20*500 {
			b.Fatalf("%d retirable", n)
		}
	}
}

// BenchmarkFoldChurn: folding the history of BenchmarkRetirable from
// scratch (what replay and a restart without checkpoint do), the
// janitor's bookkeeping (Released, open plans) included.
func BenchmarkFoldChurn(b *testing.B) {
	evs := churn(b, 19, 500).log
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := projections.New()
		for j, ev := range evs {
			if err := projections.Apply(st, uint64(j+1), ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(evs)), "events")
}

// BenchmarkRollback: deciding a rollback to the first generation of
// BenchmarkRetirable's state (500 generations of 20 models; the rule
// rebuilds the target from the env's history).
func BenchmarkRollback(b *testing.B) {
	w := churn(b, 19, 500)
	cmd := &commands.Rollback{Meta: commands.Meta{ID: "rb", At: day(2)}, Env: "prod", ToGeneration: 1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, err := Decide(w.st, cmd); err != nil || len(d.Events) != 1 {
			b.Fatalf("%v %v", d, err)
		}
	}
}
