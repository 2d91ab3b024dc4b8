package commands

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/events"
)

// RetireTables retires snapshot tables nothing uses any more (issue 17's
// janitor): for each table, a TableRetired event clears its coverage, and
// the warehouse drops it. The engine decides it against its state
// (decide.Retirable's rule): a table an environment's incumbent or an open
// plan uses, one never used, one already retired, or one whose last use
// ended less than GraceMS before the command's clock, or that an
// environment's incumbent wrote or read until less than the retention
// (RetainMS) before it (a rollback may restore it), is refused (conflict,
// field tables[i]) and nothing is appended. `serve` sends it on its own
// (--janitor-every); a client may send it too.
type RetireTables struct {
	Meta `msgpack:",inline"`
	// Tables are tidemark table ids (a snapshot's table, e.g. "events@v1"),
	// 1 to MaxRetireTables, each once.
	Tables []string `msgpack:"tables" json:"tables"`
	// GraceMS is the grace period in milliseconds: a table is retired only
	// when its last use ended more than this before the command's clock.
	// At least MinRetireGrace.
	GraceMS int64 `msgpack:"grace_ms" json:"grace_ms"`
	// RetainMS is the retention in milliseconds: a table an environment's
	// incumbent wrote or read is retired only when it stopped doing so (a
	// promotion or a rollback demoted it) more than this before the
	// command's clock, so that a rollback within the retention always
	// finds its tables. 0 or omitted: DefaultRetain; else at least
	// MinRetireGrace. `serve --retain` sets the janitor's.
	RetainMS int64 `msgpack:"retain_ms,omitempty" json:"retain_ms,omitempty"`
}

// Limits of retire_tables.
const (
	// MaxRetireTables is the most tables one retire_tables may name.
	MaxRetireTables = 1_000
	// MinRetireGrace is the shortest grace period retire_tables accepts:
	// work of a plan that has just closed may still be running.
	MinRetireGrace = time.Hour
	// DefaultRetain is the retention of a retire_tables that names none,
	// and serve's default --retain: 7 days, SQLMesh's default.
	DefaultRetain = 7 * 24 * time.Hour
	// MaxRetain is the longest retention retire_tables accepts: 100 years.
	MaxRetain = 100 * 365 * 24 * time.Hour
)

// Grace is GraceMS as a duration.
func (c *RetireTables) Grace() time.Duration { return time.Duration(c.GraceMS) * time.Millisecond }

// Retain is RetainMS as a duration (DefaultRetain when 0).
func (c *RetireTables) Retain() time.Duration {
	if c.RetainMS == 0 {
		return DefaultRetain
	}
	return time.Duration(c.RetainMS) * time.Millisecond
}

// Validate implements Command.
func (c *RetireTables) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if len(c.Tables) == 0 {
		return Errorf(CodeInvalid, "tables", "at least one table is required")
	}
	if len(c.Tables) > MaxRetireTables {
		return Errorf(CodeLimit, "tables", "at most %d tables per command, got %d", MaxRetireTables, len(c.Tables))
	}
	seen := make(map[string]bool, len(c.Tables))
	for i, t := range c.Tables {
		field := fmt.Sprintf("tables[%d]", i)
		m, v, ok := events.ParseSnapshotID(t)
		if !ok || !events.ValidModelName(m) || !events.ValidVersion(v) {
			return Errorf(CodeInvalid, field, "table %q: want a tidemark table id, <model>@<version>", t)
		}
		if seen[t] {
			return Errorf(CodeInvalid, field, "table %q is named twice", t)
		}
		seen[t] = true
	}
	if c.GraceMS < MinRetireGrace.Milliseconds() {
		return Errorf(CodeInvalid, "grace_ms", "grace_ms %d: at least %d (%s)", c.GraceMS, MinRetireGrace.Milliseconds(), MinRetireGrace)
	}
	if c.RetainMS != 0 && c.RetainMS < MinRetireGrace.Milliseconds() {
		return Errorf(CodeInvalid, "retain_ms", "retain_ms %d: at least %d (%s), or omitted for the default %s", c.RetainMS, MinRetireGrace.Milliseconds(), MinRetireGrace, DefaultRetain)
	}
	if c.RetainMS > MaxRetain.Milliseconds() {
		return Errorf(CodeInvalid, "retain_ms", "retain_ms %d: at most 100 years", c.RetainMS)
	}
	return nil
}
