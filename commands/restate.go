package commands

import (
	"unicode/utf8"

	"github.com/tidemark/tidemark/events/interval"
)

// Restate recomputes ranges of a model that production already covers
// (its sources changed, a bug was fixed in them): a RestatementRequested
// event with the IntervalsInvalidated of every table it touches, in one
// atomic batch. The ranges of Model, widened to whole intervals of its
// incumbent's unit, and every interval of the environment's transitively
// downstream models that overlaps them (each mapped to its own unit), are
// invalidated where their tables cover them and recomputed at once as
// work of run kind restate, parents before children (decide states the
// rules). An operator's command (docs/auth.conf: the service role), never
// a worker's.
type Restate struct {
	Meta  `msgpack:",inline"`
	Env   string `msgpack:"env" json:"env"`
	Model string `msgpack:"model" json:"model"`
	// Ranges are the ranges to restate (at least one, at most MaxRanges).
	Ranges []interval.Range `msgpack:"ranges" json:"ranges"`
	// Generation, when set, is the environment generation the operator
	// read: a restatement of an environment that moved on since is
	// refused with stale_generation (0: the current one).
	Generation uint64 `msgpack:"generation,omitempty" json:"generation,omitempty"`
	// Reason says why, for humans; at most MaxCancelReason bytes.
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// Kind implements Command.
func (*Restate) Kind() string { return KindRestate }

// Header implements Command.
func (c *Restate) Header() *Meta { return &c.Meta }

// Validate implements Command.
func (c *Restate) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if err := name("env", c.Env); err != nil {
		return err
	}
	if err := modelName("model", c.Model); err != nil {
		return err
	}
	if err := validateRanges(c.Ranges); err != nil {
		return err
	}
	return oneLine("reason", c.Reason)
}

// oneLine validates a short human text: at most MaxCancelReason bytes of
// UTF-8, no control characters.
func oneLine(field, s string) error {
	if len(s) > MaxCancelReason {
		return Errorf(CodeLimit, field, "at most %d bytes, got %d", MaxCancelReason, len(s))
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalid, field, "%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return Errorf(CodeInvalid, field, "%s holds a control character (%U): one line of text", field, r)
		}
	}
	return nil
}
