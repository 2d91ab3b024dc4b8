package notify

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

// The kinds of notice (the field kind).
const (
	// KindPromotion is a promotion decision (PromotionDecided), accepted
	// or rejected.
	KindPromotion = "promotion_decided"
	// KindRollback is a rollback decision (EnvironmentRolledBack).
	KindRollback = "rollback"
	// KindRestatement is a restatement (RestatementRequested).
	KindRestatement = "restatement"
	// KindWorkFailed is work given up: a RunFailed its worker (or the
	// publisher, when a batch ran out of deliveries) recorded final.
	KindWorkFailed = "work_failed"
	// KindLate is an incumbent becoming late; KindOnTime one late no more.
	KindLate   = "late"
	KindOnTime = "on_time"
)

// MaxMessageFindings bounds the findings a rejection's message names
// (the rest are counted): a plan of many models would make a document
// an endpoint may refuse for its size.
const MaxMessageFindings = 10

// Notice is the JSON document POSTed for one notification
// (docs/notifications.md). Field names are stable; new fields are added
// optional.
type Notice struct {
	// Kind says what happened (KindPromotion, …).
	Kind string `json:"kind"`
	// Key is the idempotency key, also sent as the Idempotency-Key header:
	// the same notice always has the same key, whoever sends it and
	// however often.
	Key string `json:"key"`
	// Seq is the stream sequence of the event the notice reports (for a
	// lateness change: the sequence of the state it was judged on).
	Seq uint64 `json:"seq"`
	// Index places an event stored in a group message (events.Record);
	// omitted for an event stored alone.
	Index int `json:"index,omitempty"`
	// Time is when it happened: the event's time, or the clock a lateness
	// change was judged at.
	Time time.Time `json:"time"`
	Env  string    `json:"env,omitempty"`
	Plan string    `json:"plan,omitempty"`
	// Outcome is a promotion's verdict (accepted, rejected).
	Outcome string `json:"outcome,omitempty"`
	// Codes are a promotion's codes (sorted).
	Codes    []string `json:"codes,omitempty"`
	Model    string   `json:"model,omitempty"`
	Snapshot string   `json:"snapshot,omitempty"`
	// RunKind and RunID name failed work's run.
	RunKind string `json:"run_kind,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	// Attempt is failed work's last attempt.
	Attempt int `json:"attempt,omitempty"`
	// Error is failed work's error text.
	Error string `json:"error,omitempty"`
	// Frontier and ReadyFrontier are a lateness change's incumbent
	// frontier (the end of its newest computed interval) and readiness
	// frontier (the end of its newest ready interval).
	Frontier      *time.Time `json:"frontier,omitempty"`
	ReadyFrontier *time.Time `json:"ready_frontier,omitempty"`
	// Reason says why a model is late, when known.
	Reason string `json:"reason,omitempty"`
	// Message is one human sentence (or a few) saying what happened.
	Message string `json:"message"`
	// Link is the dashboard page about it, when serve has --http.
	Link string `json:"link,omitempty"`
}

// eventKey is the idempotency key of the event at (seq, index): index
// only for an event stored in a group message.
func eventKey(rec events.Record) string {
	if rec.Count > 0 {
		return "tidemark-" + strconv.FormatUint(rec.Seq, 10) + "-" + strconv.Itoa(rec.Index)
	}
	return "tidemark-" + strconv.FormatUint(rec.Seq, 10)
}

// Of is the notice an event makes, or nil: decisions (promotion,
// rollback, restatement) and work given up. Failures that will be tried
// again make none. dashboard is the dashboard's base URL ("" when none).
func Of(rec events.Record, dashboard string) *Notice {
	if rec.Err != nil || rec.Event.Payload == nil {
		return nil
	}
	n := &Notice{Key: eventKey(rec), Seq: rec.Seq, Index: rec.Index, Time: rec.Event.OccurredAt.UTC()}
	switch p := rec.Event.Payload.(type) {
	case events.PromotionDecided:
		n.Kind, n.Env, n.Plan, n.Outcome = KindPromotion, p.Env, p.Plan, string(p.Outcome)
		n.Codes = append([]string{}, p.Codes...)
		sort.Strings(n.Codes)
		n.Message = fmt.Sprintf("plan %s for %s: %s [%s]", p.Plan, p.Env, strings.ToUpper(string(p.Outcome)), strings.Join(n.Codes, ", "))
		if p.Outcome != events.Accepted {
			shown, more := 0, 0
			for _, f := range p.Findings {
				switch {
				case f.Message == "":
				case shown < MaxMessageFindings:
					n.Message += "; " + f.Message
					shown++
				default:
					more++
				}
			}
			if more > 0 {
				n.Message += fmt.Sprintf("; and %d more findings (the decision's page lists them)", more)
			}
		}
		n.Link = link(dashboard, "/decisions/"+strconv.FormatUint(rec.Seq, 10))
	case events.EnvironmentRolledBack:
		n.Kind, n.Env = KindRollback, p.Env
		var ms []string
		for _, m := range p.Models {
			ms = append(ms, fmt.Sprintf("%s: %s instead of %s", m.Model, m.Restored, m.Demoted))
		}
		n.Message = fmt.Sprintf("%s rolled back to generation %d (now generation %d)", p.Env, p.ToGeneration, p.Generation)
		if len(ms) > 0 {
			n.Message += ": " + strings.Join(ms, ", ")
		}
		n.Link = link(dashboard, "/")
	case events.RestatementRequested:
		n.Kind, n.Env, n.Model, n.Snapshot, n.RunID = KindRestatement, p.Env, p.Model, p.Snapshot, p.Run
		n.RunKind = string(events.RunRestate)
		n.Message = fmt.Sprintf("%s restated in %s: %d model(s) recomputed", p.Model, p.Env, len(p.Work))
		if p.Reason != "" {
			n.Message += " (" + p.Reason + ")"
		}
		n.Link = link(dashboard, "/")
	case events.RunFailed:
		if !p.Final {
			return nil
		}
		model, _, _ := events.ParseSnapshotID(p.Snapshot)
		n.Kind, n.Model, n.Snapshot, n.RunKind, n.RunID = KindWorkFailed, model, p.Snapshot, string(p.RunKind), p.RunID
		n.Attempt, n.Error = p.Attempt, p.Error
		n.Message = fmt.Sprintf("%s %s work given up after %d attempt(s): %s", p.Snapshot, p.RunKind, p.Attempt, p.Error)
		n.Link = link(dashboard, "/")
		if _, plan, ok := events.PlanOfRunID(p.RunID); ok {
			n.Plan = plan
			n.Link = link(dashboard, "/plans/"+url.PathEscape(plan))
		}
	default:
		return nil
	}
	return n
}

func link(dashboard, path string) string {
	if dashboard == "" {
		return ""
	}
	return strings.TrimSuffix(dashboard, "/") + path
}

// Lateness is one environment incumbent measured against its readiness
// at a clock.
type Lateness struct {
	Env, Model, Snapshot string
	// Frontier is the end of the newest interval the incumbent's table
	// covers (its start, floored to its unit, while it covers nothing);
	// Ready the end of the newest interval ready at the clock.
	Frontier, Ready time.Time
	// Late, Cause and Reason are views.Status's: the frontier trails Ready
	// by more than the incumbent's freshness bound (one interval of its
	// unit unless its definition says otherwise), why when known
	// (commands.LateCause) and the same in words.
	Late   bool
	Cause  string
	Reason string
}

// Late measures every environment's incumbents at now (the caller's
// clock: notify reads the wall clock, never decide or the projections),
// by env and model, by the one rule status and the dashboard apply
// (views.Status). With noWorker (no worker heartbeat is live), a late
// model with no other cause has the cause no_worker, as in status.
func Late(st *projections.State, now time.Time, noWorker bool) []Lateness {
	envs, _ := views.Status(st, "", now)
	if noWorker {
		views.NoWorker(envs)
	}
	var out []Lateness
	for _, e := range envs {
		for _, ms := range e.Models {
			sn, ok := st.Snapshots[ms.Snapshot]
			if !ok || ms.Ready.IsZero() {
				continue // nothing ready yet: never late
			}
			l := Lateness{Env: e.Env, Model: ms.Model, Snapshot: ms.Snapshot, Frontier: ms.Frontier, Ready: ms.Ready,
				Late: ms.Late, Cause: string(ms.LateCause), Reason: ms.LateReason}
			if start := sn.Schedule.Unit().Floor(sn.Start); l.Frontier.Before(start) {
				l.Frontier = start
			}
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Env < out[j].Env || out[i].Env == out[j].Env && out[i].Model < out[j].Model
	})
	return out
}

// lateKey names an incumbent in the late set: "env/model".
func lateKey(env, model string) string { return env + "/" + model }

// latenessNotice is the notice of l's change (late, or on time again),
// judged at now on the state at seq.
func latenessNotice(l Lateness, seq uint64, now time.Time, dashboard string) *Notice {
	f, r := l.Frontier.UTC(), l.Ready.UTC()
	n := &Notice{Kind: KindOnTime, Seq: seq, Time: now.UTC(), Env: l.Env, Model: l.Model, Snapshot: l.Snapshot,
		Frontier: &f, ReadyFrontier: &r, Link: link(dashboard, "/")}
	if l.Late {
		n.Kind, n.Reason = KindLate, l.Reason
		n.Message = fmt.Sprintf("%s in %s (%s) is late: computed up to %s, ready up to %s", l.Model, l.Env, l.Snapshot, f.Format(time.RFC3339), r.Format(time.RFC3339))
		if l.Reason != "" {
			n.Message += "; " + l.Reason
		}
	} else {
		n.Message = fmt.Sprintf("%s in %s (%s) is on time again: computed up to %s", l.Model, l.Env, l.Snapshot, f.Format(time.RFC3339))
	}
	// One lateness episode per incumbent and frontier: it cannot become
	// late twice without its frontier moving, nor on time twice. Names
	// hold '-' but no '/': "a-b" serving c@v1 and "a" serving b-c@v1
	// have two keys.
	n.Key = "tidemark-" + n.Kind + "-" + l.Env + "/" + l.Snapshot + "/" + strconv.FormatInt(f.Unix(), 10)
	return n
}
