package decide

import (
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// rollback decides a rollback by policy.Rollback's rule: one
// EnvironmentRolledBack, appended only if nothing at all changed since the
// view was read (like a promotion: the rule reads the env, its history,
// the retired tables and the repair debt), or a typed refusal naming the
// field.
func rollback(st *projections.State, c *commands.Rollback) (Decision, error) {
	ev, refusal := policy.Rollback(st, c.Env, c.ToGeneration, c.At)
	if refusal != nil {
		code := commands.CodeConflict
		if refusal.NotFound {
			code = commands.CodeNotFound
		}
		return Decision{}, commands.Errorf(code, refusal.Field, "%s", refusal.Message)
	}
	return Decision{Events: []events.Payload{ev}, Expect: events.ExpectStream(st.Seq), Reply: commands.Reply{Rollback: &ev}}, nil
}

// rolledBackAt returns the rollback of st stored at seq, or nil.
func rolledBackAt(st *projections.State, env string, seq uint64) *events.EnvironmentRolledBack {
	for _, g := range st.Env(env).History {
		if g.Seq == seq && g.Rollback != nil {
			ev := *g.Rollback
			return &ev
		}
	}
	return nil
}
