package integration

import (
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
)

// A register_snapshots of the most registrations it may carry is stored
// (one atomic batch of that many events), each at its own sequence.
func TestRegisterSnapshotsAtTheLimit(t *testing.T) {
	e := open(t, engine.Config{TrustCommandTime: true})
	c := &commands.RegisterSnapshots{Meta: meta(at(0))}
	for i := range commands.MaxRegisterSnapshots {
		c.Snapshots = append(c.Snapshots, commands.RegisterSnapshot{Model: fmt.Sprintf("m%04d", i), Version: "v1", Cron: "@hourly", Start: at(0)})
	}
	r := must(t, e.Handle(t.Context(), c))
	if len(r.Registered) != commands.MaxRegisterSnapshots {
		t.Fatalf("registered %d, want %d: %+v", len(r.Registered), commands.MaxRegisterSnapshots, r.Message)
	}
	if got := lastSeq(t, e); got != r.Seq || r.Seq < uint64(commands.MaxRegisterSnapshots) {
		t.Errorf("the stream's last seq %d, the reply's %d", got, r.Seq)
	}
}
