package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/work"
)

// twoWorkersConf is docs/auth.conf with a second worker user, worker2, in
// an account of its own, as the file says to add one (its heartbeat only:
// all this test needs of it).
func twoWorkersConf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	export := `      { service: "tidemark.workers.heartbeat.worker", accounts: [WORKER] }`
	if !strings.Contains(conf, export) {
		t.Fatalf("docs/auth.conf lacks %s", export)
	}
	conf = strings.Replace(conf, export, export+"\n"+`      { service: "tidemark.workers.heartbeat.worker2", accounts: [WORKER2] }`, 1)
	i := strings.LastIndex(conf, "}")
	conf = conf[:i] + `  WORKER2 {
    users = [
      { user: worker2, password: "worker2-change-me", permissions: {
          publish: { allow: ["tidemark.workers.heartbeat.worker2"] }
          subscribe: { allow: ["_INBOX.worker2.>"] }
      } }
    ]
    imports = [
      { service: { account: TIDEMARK, subject: "tidemark.workers.heartbeat.worker2" } }
    ]
  }
` + conf[i:]
	p := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHeartbeatsBoundToSender: under docs/auth.conf a worker user beats
// on its own subject only: its heartbeats on the engine's subject (as the
// built-in worker) or on another user's are refused by the server; the
// service user may beat on none. 10,000 fake heartbeats from the worker
// user leave the built-in worker and another user's real worker, which
// starts after the flood, on the roster, and the flood holds at most
// MaxWorkersPerUser entries.
func TestHeartbeatsBoundToSender(t *testing.T) {
	cfg := natsnode.Config{DataDir: t.TempDir(), AuthFile: twoWorkersConf(t), User: "admin", Password: "admin-change-me", Listen: "127.0.0.1:-1"}
	node := jstest.Node(t, cfg)
	roster := &work.Roster{}
	stop, err := roster.Subscribe(node.Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The built-in worker beats on the engine's own connection.
	builtinDone := make(chan struct{})
	go func() {
		defer close(builtinDone)
		_ = work.Beat(ctx, node.Conn(), "builtin-h-1", work.KindBuiltin, 50*time.Millisecond, &work.Stats{})
	}()
	defer func() { cancel(); <-builtinDone }()

	mallory, violations := asUser(t, node.ClientURL(), "worker")
	hb := func(name, kind string) []byte {
		b, _ := json.Marshal(work.Heartbeat{Name: name, Kind: kind, EveryMS: 300_000, At: time.Now().UTC()})
		return b
	}
	// Spoofs: the engine's subject, another user's.
	for _, subject := range []string{work.HeartbeatSubject, work.HeartbeatSubjectFor("worker2")} {
		if err := mallory.Publish(subject, hb("spoof", work.KindExec)); err != nil {
			t.Fatal(err)
		}
	}
	// The flood, on its own subject.
	for i := range 10_000 {
		if err := mallory.Publish(work.HeartbeatSubjectFor("worker"), hb(fmt.Sprintf("fake-%05d", i), work.KindExec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := mallory.Publish(work.HeartbeatSubjectFor("worker"), hb("last", work.KindExec)); err != nil {
		t.Fatal(err)
	}
	if err := mallory.Flush(); err != nil {
		t.Fatal(err)
	}
	service, serviceViolations := asUser(t, node.ClientURL(), "service")
	if err := service.Publish(work.HeartbeatSubjectFor("service"), hb("svc", work.KindExec)); err != nil {
		t.Fatal(err)
	}
	_ = service.Flush()

	// The real worker of another user starts after the flood.
	real, _ := asUser(t, node.ClientURL(), "worker2")
	realDone := make(chan struct{})
	go func() {
		defer close(realDone)
		_ = work.Beat(ctx, real, "real", work.KindSQL, 50*time.Millisecond, &work.Stats{})
	}()
	defer func() { cancel(); <-realDone }()

	has := func(live []work.Worker, user, name string) bool {
		for _, w := range live {
			if w.User == user && w.Name == name {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(20 * time.Second)
	for live := roster.Live(); !has(live, "worker", "last") || !has(live, "worker2", "real") || !has(live, "", "builtin-h-1"); live = roster.Live() {
		if time.Now().After(deadline) {
			t.Fatalf("not all of the flood's end, the real worker and the built-in one are live: %d live, builtin %v, real %v, last %v",
				len(live), has(live, "", "builtin-h-1"), has(live, "worker2", "real"), has(live, "worker", "last"))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	for ; !contains(violations(), `"`+work.HeartbeatSubjectFor("worker2")+`"`) || !contains(violations(), `"`+work.HeartbeatSubject+`"`) ||
		!contains(serviceViolations(), `"`+work.HeartbeatSubjectFor("service")+`"`); time.Sleep(10 * time.Millisecond) { // polling, bounded
		if time.Now().After(deadline) {
			t.Fatalf("no permission violations for the spoofs: worker %v; service %v", violations(), serviceViolations())
		}
	}
	perUser := map[string]int{}
	for _, w := range roster.Live() {
		perUser[w.User]++
		if w.Name == "spoof" || w.Name == "svc" {
			t.Errorf("a spoofed heartbeat is live: %+v", w)
		}
	}
	if perUser["worker"] > work.MaxWorkersPerUser || perUser["worker2"] != 1 || perUser[""] != 1 || len(perUser) != 3 {
		t.Fatalf("live per user: %v", perUser)
	}
}
