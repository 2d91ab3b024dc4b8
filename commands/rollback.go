package commands

// Rollback puts an environment's previous incumbents back (an
// EnvironmentRolledBack event): the incumbents it had at ToGeneration, or,
// when ToGeneration is 0, those of the generation before the current one.
// It is decided purely on the engine's state (policy.Rollback): one view
// swap, nothing recomputed; the env generation moves on, which fences the
// demoted snapshots' scheduler (a stale advance_scheduler is
// stale_generation) and makes every plan built before it
// conflicting_plan at promote. Refused, appending nothing: an unknown env
// (not_found, field env); a target that is not an earlier generation, had
// no incumbents, lacks a model the env serves now, serves what the env
// serves now, or whose tables were retired (conflict, field
// to_generation). An operator's command (the service role).
type Rollback struct {
	Meta `msgpack:",inline"`
	Env  string `msgpack:"env" json:"env"`
	// ToGeneration is the generation whose incumbents are restored; 0 or
	// omitted: the generation before the current one.
	ToGeneration uint64 `msgpack:"to_generation,omitempty" json:"to_generation,omitempty"`
}

// Kind implements Command.
func (*Rollback) Kind() string { return KindRollback }

// Header implements Command.
func (c *Rollback) Header() *Meta { return &c.Meta }

// Validate implements Command.
func (c *Rollback) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	return name("env", c.Env)
}
