package invariants

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/replay"
)

// Each invariant can fail: scripted histories, some with a decision
// tampered with before it is appended, must each break the invariant they
// name; TestStaleViewsAreFenced replays the former bugs of stale views.

// recorder is a tb that records the first broken invariant and stops the
// script.
type recorder struct {
	t      *testing.T
	broken string
}

type stop struct{}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	if testing.Verbose() {
		r.t.Logf(format, args...)
	}
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.broken = fmt.Sprintf(format, args...)
	panic(stop{})
}

// scripted plays script on a fresh history of models, deployed to prod
// at v1; after each command the global checks run too.
func scripted(t *testing.T, models []modelDef, script func(s *sim)) (broken string) {
	t.Helper()
	r := &recorder{t: t}
	s := newSim(nil, models)
	s.tb = r
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(stop); !ok {
				panic(p)
			}
		}
		broken = r.broken
	}()
	s.setup()
	script(s)
	s.checkGlobal()
	return ""
}

func expectBroken(t *testing.T, invs string, models []modelDef, script func(s *sim)) {
	t.Helper()
	broken := scripted(t, models, script)
	for _, inv := range strings.Split(invs, ",") {
		if strings.HasPrefix(broken, "INVARIANT "+inv+" ") {
			t.Logf("%s", broken)
			return
		}
	}
	if broken == "" {
		t.Fatalf("invariant %s held", invs)
	}
	t.Fatalf("want invariant %s broken, got: %s", invs, broken)
}

// expectFenced runs script, whose last command is decided on a stale view,
// and requires every invariant to hold and that command to be refused.
func expectFenced(t *testing.T, models []modelDef, script func(s *sim) error) {
	t.Helper()
	var last error
	if broken := scripted(t, models, func(s *sim) { last = script(s) }); broken != "" {
		t.Fatalf("%s", broken)
	}
	if !errors.Is(last, errStale) {
		t.Fatalf("the command decided on a stale view was not fenced: %v", last)
	}
}

var hourly = schedDef{"@hourly", "", false}

func model(name string, sd schedDef, kind events.Kind, deps ...string) modelDef {
	if kind == "" {
		kind = events.Incremental
	}
	return modelDef{Name: name, Sched: sd, Start: t0, Kind: kind, Deps: append([]string{}, deps...)}
}

// Helpers for scripts: every work item is completed at once.
func (s *sim) all()                { s.runQueue(workAll, "") }
func (s *sim) tickNext(env string) { s.tick(env, 1, false); s.all() }
func (s *sim) plan(id, env string, versions map[string]string, trailing, catchUp int) {
	if _, err := s.buildPlan(id, env, versions, trailing, catchUp); err != nil {
		s.tb.Fatalf("plan %s: %v", id, err)
	}
	s.all()
}
func (s *sim) version(def modelDef, v string) {
	if err := s.register(def, v); err != nil {
		s.tb.Fatalf("register: %v", err)
	}
}

// mutateDecision tampers with the first decision of plan.
func mutateDecision(s *sim, plan string, fn func(d *events.PromotionDecided)) {
	done := false
	s.mutate = func(cmd commands.Command, d *decide.Decision) {
		if done {
			return
		}
		for i, p := range d.Events {
			if pd, ok := p.(events.PromotionDecided); ok && pd.Plan == plan {
				fn(&pd)
				d.Events[i] = pd
				done = true
			}
		}
	}
}

// race: p1 sets events v2 under pol, is backfilled, and the incumbent
// advances once before the promote.
func race(s *sim, trailing, catchUp int) {
	s.version(s.models[0], "v2")
	s.plan("p1", "prod", map[string]string{"events": "v2"}, trailing, catchUp)
	s.tickNext("prod")
}

func TestEachInvariantCanFail(t *testing.T) {
	events1 := []modelDef{model("events", hourly, "")}
	chain := []modelDef{model("events", hourly, ""), model("sessions", hourly, "", "events")}

	t.Run("1 accepting a missing interval", func(t *testing.T) {
		expectBroken(t, "1", events1, func(s *sim) {
			race(s, 0, 0)
			mutateDecision(s, "p1", func(d *events.PromotionDecided) {
				d.Outcome, d.Codes, d.Generation = events.Accepted, []string{policy.CodeNoGaps}, d.Generation+1
				d.Models["events"] = events.ModelFinding{Snapshot: "events@v2", Codes: []string{policy.CodeNoGaps}, Missing: []interval.Range{}}
				d.Findings = nil
			})
			_, _, _ = s.promote("p1")
		})
	})
	t.Run("R a rollback restoring the wrong incumbent", func(t *testing.T) {
		expectBroken(t, "R", events1, func(s *sim) {
			s.version(s.models[0], "v2")
			s.plan("p1", "prod", map[string]string{"events": "v2"}, 0, 0)
			if d, _, err := s.promote("p1"); err != nil || d == nil || d.Outcome != events.Accepted {
				s.tb.Fatalf("promote p1: %+v %v", d, err)
			}
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if rb, ok := p.(events.EnvironmentRolledBack); ok {
						rb.Models = []events.RolledBackModel{{Model: "events", Restored: "events@v2", Table: "events@v2", Demoted: "events@v2"}}
						d.Events[i] = rb
					}
				}
			}
			_, _, _ = s.exec(&commands.Rollback{Env: "prod"})
		})
	})
	t.Run("1 a trailing gap without repair debt", func(t *testing.T) {
		expectBroken(t, "1", events1, func(s *sim) {
			race(s, 1, 0)
			mutateDecision(s, "p1", func(d *events.PromotionDecided) { d.Repairs = nil })
			_, _, _ = s.promote("p1")
		})
	})
	t.Run("2 a candidate writing production", func(t *testing.T) {
		expectBroken(t, "2", chain, func(s *sim) {
			s.version(s.models[0], "v2")
			s.plan("p1", "prod", map[string]string{"events": "v2"}, 0, 1)
			s.tickNext("prod")
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if inv, ok := p.(events.IntervalsInvalidated); ok {
						inv.Table = "sessions@v1"
						d.Events[i] = inv
					}
				}
			}
			// sessions@v1+p1 holds the suffix: catch-up recomputes it.
			_ = s.complete("sessions@v1+p1", interval.NewSet(interval.R(s.clock.Add(-time.Hour), s.clock)))
			_, _, _ = s.promote("p1")
		})
	})
	t.Run("3 an unaligned advance", func(t *testing.T) {
		expectBroken(t, "3", events1, func(s *sim) {
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if a, ok := p.(events.SchedulerAdvanced); ok {
						a.Ranges = []interval.Range{interval.R(a.Ranges[0].Start.Add(time.Minute), a.Ranges[0].End)}
						d.Events[i] = a
					}
				}
			}
			s.tickNext("prod")
		})
	})
	t.Run("4 a derived version with two '+'", func(t *testing.T) {
		expectBroken(t, "4", chain, func(s *sim) {
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if r, ok := p.(events.SnapshotRegistered); ok && strings.Contains(r.Version, "+") {
						r.Version += "+x"
						r.Snapshot = events.SnapshotID(r.Model, r.Version)
						d.Events[i] = r
					}
				}
			}
			s.version(s.models[0], "v2")
			_, _ = s.buildPlan("p1", "prod", map[string]string{"events": "v2"}, 0, 0)
		})
	})
	t.Run("5 a code an accepted decision may not carry", func(t *testing.T) {
		expectBroken(t, "5", events1, func(s *sim) {
			race(s, 1, 0)
			mutateDecision(s, "p1", func(d *events.PromotionDecided) {
				d.Codes = append(d.Codes, policy.CodeCatchUpRequested)
			})
			_, _, _ = s.promote("p1")
		})
	})
	t.Run("6 a decision replay does not reproduce", func(t *testing.T) {
		expectBroken(t, "6", events1, func(s *sim) {
			race(s, 0, 0)
			mutateDecision(s, "p1", func(d *events.PromotionDecided) { d.Findings[0].Message = "tampered" })
			_, _, _ = s.promote("p1")
		})
	})
	t.Run("7 the scheduler advancing a candidate", func(t *testing.T) {
		expectBroken(t, "7", events1, func(s *sim) {
			s.version(s.models[0], "v2")
			s.plan("p1", "prod", map[string]string{"events": "v2"}, 0, 0)
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if a, ok := p.(events.SchedulerAdvanced); ok {
						a.Snapshot = "events@v2"
						d.Events[i] = a
					}
				}
			}
			s.tickNext("prod")
		})
	})
	t.Run("8 a tick leaving ready work unscheduled", func(t *testing.T) {
		expectBroken(t, "8", events1, func(s *sim) {
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				if _, ok := cmd.(*commands.AdvanceScheduler); ok {
					d.Events = nil
				}
			}
			s.tickNext("prod")
		})
	})
	t.Run("9 repair debt that stays open when covered", func(t *testing.T) {
		expectBroken(t, "9", events1, func(s *sim) {
			race(s, 1, 0)
			_, _, _ = s.promote("p1")
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				var keep []events.Payload
				for _, p := range d.Events {
					if _, ok := p.(events.RepairCompleted); !ok {
						keep = append(keep, p)
					}
				}
				d.Events = keep
			}
			s.all()
		})
	})
	t.Run("10 a decision the oracle disagrees with", func(t *testing.T) {
		expectBroken(t, "10", events1, func(s *sim) {
			race(s, 0, 0)
			mutateDecision(s, "p1", func(d *events.PromotionDecided) {
				d.Codes = []string{policy.CodeHistoricalGap}
				f := d.Models["events"]
				f.Codes = d.Codes
				d.Models["events"] = f
				d.Findings[0].Code = policy.CodeHistoricalGap
			})
			_, _, _ = s.promote("p1")
		})
	})
	t.Run("11 lookback of a tick that did not fire", func(t *testing.T) {
		// Issue 33: deployed at 06:00 (the clock), events' 06:00 tick is the
		// deploy's instant. The run to 06:30 fires halves' tick only; the
		// scheduler of issue 33 asked events for the lookback of its 06:00
		// tick, [02:00, 05:00), there.
		ms := []modelDef{model("events", hourly, ""), model("halves", schedDef{"*/30 * * * *", "", false}, "")}
		ms[0].Lookback = 3
		expectBroken(t, "11", ms, func(s *sim) {
			from, until := s.clock, s.clock.Add(30*time.Minute)
			pre := replay.Fold(s.log)
			got, fired := s.runScheduler("prod", until, false)
			got["events"] = got["events"].AddSet(interval.NewSet(interval.R(from.Add(-4*time.Hour), from.Add(-time.Hour))))
			s.checkRunWork(pre, "prod", from, until, fired, got)
		})
	})
	t.Run("P a plan composition", func(t *testing.T) {
		expectBroken(t, "P", chain, func(s *sim) {
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if pb, ok := p.(events.PlanBuilt); ok {
						pb.Candidates = pb.Candidates[:1]
						d.Events[i] = pb
					}
				}
			}
			s.version(s.models[0], "v2")
			_, _ = s.buildPlan("p1", "prod", map[string]string{"events": "v2"}, 0, 0)
		})
	})
}

// Decisions made on a stale view (a deposed writer, a replica that has not
// seen the latest events) are fenced: Decide's Expect names the sequence it
// read, so their appends fail and nothing stale is stored. Each history
// broke its invariant before the fencing token (issue 16).
func TestStaleViewsAreFenced(t *testing.T) {
	t.Run("advance after a promotion", func(t *testing.T) {
		expectFenced(t, []modelDef{model("events", hourly, "")}, func(s *sim) error {
			s.version(s.models[0], "v2")
			s.plan("p1", "prod", map[string]string{"events": "v2"}, 0, 0)
			view := replay.Fold(s.log) // a replica that has not seen the promotion
			_, _, _ = s.promote("p1")
			s.clock = s.clock.Add(time.Hour)
			_, _, err := s.execOn(view, &commands.AdvanceScheduler{Meta: commands.Meta{ID: "tick"}, Env: "prod", Generation: 1})
			return err
		})
	})
	t.Run("finalize after a newer promotion", func(t *testing.T) {
		expectFenced(t, []modelDef{model("events", hourly, "")}, func(s *sim) error {
			s.version(s.models[0], "v2")
			s.version(s.models[0], "v3")
			s.plan("p1", "prod", map[string]string{"events": "v2"}, 0, 0)
			_, _, _ = s.promote("p1")
			s.plan("p2", "prod", map[string]string{"events": "v3"}, 0, 0)
			view := replay.Fold(s.log) // a replica that has not seen p2's promotion
			_, _, _ = s.promote("p2")
			_, _, err := s.execOn(view, &commands.Finalize{Plan: "p1"})
			return err
		})
	})
	t.Run("completion after an acceptance with a gap", func(t *testing.T) {
		expectFenced(t, []modelDef{model("events", hourly, "")}, func(s *sim) error {
			race(s, 1, 0)
			view := replay.Fold(s.log) // a replica that has not seen the acceptance
			_, _, _ = s.promote("p1")
			s.queue = nil
			_, _, err := s.execOn(view, &commands.CompleteIntervals{Model: "events", Version: "v2", RunKind: events.RunRepair,
				Ranges: []interval.Range{interval.R(s.clock.Add(-time.Hour), s.clock)}})
			return err
		})
	})
}
