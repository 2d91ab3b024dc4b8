package commands

import "unicode/utf8"

// CancelPlan ends a plan's outstanding work (a PlanCancelled event): the
// workers compute none of its backfill or catch-up work any more, and the
// engine refuses completions of it. The plan is not removed: promoting it
// is evaluated as for any plan, so what its candidates miss is reported
// (missing_intervals), never promoted silently. An unknown plan is
// not_found; a promoted one, or one cancelled already, is refused
// (conflict, field plan).
type CancelPlan struct {
	Meta `msgpack:",inline"`
	Plan string `msgpack:"plan" json:"plan"`
	// Reason says why, for humans; at most MaxCancelReason bytes.
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// MaxCancelReason bounds cancel_plan's reason.
const MaxCancelReason = 1024

// Kind implements Command.
func (*CancelPlan) Kind() string { return KindCancelPlan }

// Header implements Command.
func (c *CancelPlan) Header() *Meta { return &c.Meta }

// Validate implements Command.
func (c *CancelPlan) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if err := name("plan", c.Plan); err != nil {
		return err
	}
	if len(c.Reason) > MaxCancelReason {
		return Errorf(CodeLimit, "reason", "at most %d bytes, got %d", MaxCancelReason, len(c.Reason))
	}
	if !utf8.ValidString(c.Reason) {
		return Errorf(CodeInvalid, "reason", "reason is not valid UTF-8")
	}
	for _, r := range c.Reason {
		if r < 0x20 || r == 0x7f {
			return Errorf(CodeInvalid, "reason", "reason holds a control character (%U): one line of text", r)
		}
	}
	return nil
}
