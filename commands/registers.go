package commands

import (
	"fmt"

	"github.com/tidemark/tidemark/models"
)

// MaxRegisterSnapshots is the most registrations one register_snapshots
// may carry: its events are one JetStream atomic batch, which the server
// bounds to 1,000 messages by default (integration
// TestRegisterSnapshotsAtTheLimit).
const MaxRegisterSnapshots = 1_000

// RegisterSnapshots registers a set of model versions at once (a model
// file, a SQLMesh project): all of them or none. Each is a
// register_snapshot body without its own id (the command's id is the
// set's), decided as register_snapshot decides one, with the dependency
// cycle check over the whole set and the models registered before it.
// The versions registered already with the same definition are left as
// they are; one registered with another definition refuses the whole
// command, naming it. Its SnapshotRegistered events are appended as one
// atomic group, in the set's order.
type RegisterSnapshots struct {
	Meta `msgpack:",inline"`
	// Snapshots are the registrations, at least one, at most
	// MaxRegisterSnapshots, one per model.
	Snapshots []RegisterSnapshot `msgpack:"snapshots" json:"snapshots"`
}

// Kind implements Command.
func (*RegisterSnapshots) Kind() string { return KindRegisterSnapshots }

// Header implements Command.
func (c *RegisterSnapshots) Header() *Meta { return &c.Meta }

// Validate implements Command: the meta, then each registration as
// register_snapshot validates it (its fields named snapshots[i].field),
// which carries no meta of its own; a model twice is refused.
func (c *RegisterSnapshots) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if len(c.Snapshots) == 0 {
		return Errorf(CodeInvalid, "snapshots", "at least one registration is required")
	}
	if len(c.Snapshots) > MaxRegisterSnapshots {
		return Errorf(CodeLimit, "snapshots", "at most %d registrations per command, got %d", MaxRegisterSnapshots, len(c.Snapshots))
	}
	seen := make(map[string]int, len(c.Snapshots))
	for i := range c.Snapshots {
		s := &c.Snapshots[i]
		at := fmt.Sprintf("snapshots[%d]", i)
		if s.Meta != (Meta{}) {
			return Errorf(CodeInvalid, at, "a registration of register_snapshots carries no id, actor, at, correlation nor after_seq: set them on the command")
		}
		if err := s.Definition().Validate(); err != nil {
			fe := err.(*models.FieldError)
			return Errorf(CodeInvalid, at+"."+fe.Field, "%s", fe.Msg)
		}
		if s.Version == "" {
			return Errorf(CodeInvalid, at+".version", "version is required")
		}
		if j, ok := seen[s.Model]; ok {
			return Errorf(CodeInvalid, at+".model", "model %s is registered twice (snapshots[%d] and [%d]): one version per model", s.Model, j, i)
		}
		seen[s.Model] = i
	}
	return nil
}
