package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/notify"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
)

// testConfig is serve's defaults on dir: loopback, any free ports, no
// fsync, no warehouse.
func testConfig(dir string) Config {
	return Config{
		Node:     natsnode.Config{DataDir: dir, Listen: "127.0.0.1:-1", Name: "tidemark-engine"},
		Replicas: 1, Coalesce: true, Logger: slog.New(slog.DiscardHandler),
		BuiltinWorker: true, Warehouse: "none",
		WarehouseOptions: warehouse.Options{ModelTimeout: time.Minute},
		WorkAckWait:      work.DefaultAckWait, WorkMaxAttempts: work.DefaultMaxDeliver, WorkConcurrency: work.DefaultConcurrency,
		JanitorEvery: time.Hour, JanitorGrace: 24 * time.Hour, Retain: commands.DefaultRetain,
		HTTP: "127.0.0.1:0",
	}
}

// TestOpenFailureClosesWhatItBuilt: an Open that fails late (the
// dashboard's port is taken, after NATS, the engine, the lease and the
// command service are up) closes all of it: the data dir's lock is free
// at once for the next Open, and the failure names the flag.
func TestOpenFailureClosesWhatItBuilt(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.HTTP = busy.Addr().String()
	if s, err := Open(t.Context(), cfg); err == nil {
		s.Close(context.Background())
		t.Fatal("Open on a busy --http port succeeded")
	} else if !strings.Contains(err.Error(), "--http "+cfg.HTTP) {
		t.Fatalf("error does not name --http: %v", err)
	}
	s, err := Open(t.Context(), testConfig(dir))
	if err != nil {
		t.Fatalf("the data dir was left held by the failed Open: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRunThenClose: an opened server answers commands and its dashboard;
// Run returns nil once its context ends; Close releases the dashboard's
// port and the data dir, so the same directory opens again with what was
// acknowledged.
func TestRunThenClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reg := &commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", Start: time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)}
	if r, err := transport.NewClient(nc).Do(t.Context(), reg); err != nil || !r.Accepted {
		t.Fatalf("register: %+v %v", r, err)
	}
	health := s.DashboardURL() + "/healthz"
	if code := get(t, health); code != http.StatusOK {
		t.Fatalf("healthz: %d", code)
	}
	if err := s.Run(t.Context()); err == nil {
		t.Fatal("a second Run was not refused")
	}
	stop()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := http.Get(health); err == nil {
		t.Fatal("the dashboard still answers after Close")
	}
	again, err := Open(t.Context(), testConfig(dir))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer again.Close(context.Background())
	nc2, err := nats.Connect(again.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	reg.ID = ""
	r, err := transport.NewClient(nc2).Do(t.Context(), reg)
	if err != nil || !r.Accepted {
		t.Fatalf("re-register after reopening: %+v %v", r, err)
	}
}

// TestCloseWithoutRun: a server opened and closed without running frees
// its dashboard's listener (Run never served it, so Shutdown would not
// know it).
func TestCloseWithoutRun(t *testing.T) {
	s, err := Open(t.Context(), testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.DashboardURL(), "http://")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the dashboard's port %s is still held after Close: %v", addr, err)
	}
	ln.Close()
}

// TestConfigValidate: every problem is named by its flag, all at once.
func TestConfigValidate(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Retain, cfg.WorkConcurrency, cfg.BuiltinWorker, cfg.Warehouse = time.Minute, 0, false, "wh.duckdb"
	err := cfg.Validate()
	for _, want := range []string{"--retain 1m0s", "--work-concurrency 0", "--warehouse wh.duckdb without --builtin-worker"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to name %q", err, want)
		}
	}
	if _, err := Open(t.Context(), cfg); err == nil {
		t.Fatal("Open accepted an invalid config")
	}
}

// running runs s until the returned stop, which ends Run's context and
// waits (30 s at most) for Run to return nil.
func running(t *testing.T, s *Server) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of its context ending")
		}
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestCloseWithALiveDashboard: a dashboard left open in a browser (its
// /live stream never ends on its own) neither fails Close nor outlives
// it: Run shuts the dashboard down gracefully as far as it can, and
// Close ends what is left, the stream included.
func TestCloseWithALiveDashboard(t *testing.T) {
	s, err := Open(t.Context(), testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	// Open listens already: a request before Run serves waits in the
	// listener's backlog.
	resp, err := http.Get(s.DashboardURL() + "/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: update") {
		t.Fatalf("/live's first line: %q %v", line, err)
	}
	stop()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close with a dashboard stream open: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); done <- err }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard's /live stream still runs 30s after Close")
	}
}

// TestNoWorkerNotJudgedBeforeTheRosterHeard: right after Open the roster
// has heard no heartbeat yet, not even from a worker that runs, so the
// count the notifier judges no_worker by is "not known" (negative), never
// 0: a restart must not notify a late model as late for no_worker (a
// notice sent once) while its workers are up. Once the roster has listened as long
// as it takes to drop a silent worker, an empty roster counts 0.
func TestNoWorkerNotJudgedBeforeTheRosterHeard(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.BuiltinWorker, cfg.HTTP = false, ""
	cfg.Notify = notify.Notifier{URL: "http://127.0.0.1:1/hook", Attempts: 1, Backoff: time.Second, LateEvery: time.Minute}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if n := s.notifier.LiveWorkers(); n >= 0 {
		t.Fatalf("the notifier's live workers right after Open: %d, want not known (negative)", n)
	}
	now := time.Now()
	s.roster.Now = func() time.Time { return now.Add(work.MissedBeats*work.DefaultHeartbeat + time.Second) }
	if n := s.notifier.LiveWorkers(); n != 0 {
		t.Fatalf("the notifier's live workers once the roster has listened: %d, want 0", n)
	}
}
