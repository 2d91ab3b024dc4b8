package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/transport"
)

// buildTidemark compiles the CLI once for the crash test.
func buildTidemark(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tidemark")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/tidemark")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveProc is a `tidemark serve` child process.
type serveProc struct {
	cmd *exec.Cmd
}

func startServeProc(bin, dataDir string, port int) (*serveProc, error) {
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", "", "--rate-limit", "0", "--log-format", "json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "tidemark serving on") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			return nil, fmt.Errorf("serve exited: %v", cmd.Wait())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("serve did not start within 60s")
	}
	return &serveProc{cmd: cmd}, nil
}

// stop ends the process gracefully (SIGTERM), as an operator would.
func (p *serveProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.cmd.Wait()
}

func (p *serveProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// TestCrashSafety: the engine process is SIGKILLed at random points while
// 5,000 commands are sent with retries. Every acknowledged command is in
// the stream exactly once, and the projections an engine restores (from
// its checkpoint and the stream) equal a fold from scratch.
func TestCrashSafety(t *testing.T) {
	total := 5000
	if testing.Short() {
		total = 500
	}
	bin := buildTidemark(t)
	dataDir := t.TempDir()
	port := jstest.FreePorts(t, 1)[0]
	var mu sync.Mutex
	proc, err := startServeProc(bin, dataDir, port)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		mu.Lock()
		if proc != nil {
			proc.kill()
		}
		mu.Unlock()
	}()

	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client := transport.NewClient(nc)
	client.Timeout = 2 * time.Second

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	killerCtx, stopKiller := context.WithCancel(ctx)
	kills := 0
	var killerErr error
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		rng := rand.New(rand.NewPCG(1, 2))
		for kills < 8 && killerCtx.Err() == nil {
			select {
			case <-killerCtx.Done():
				return
			case <-time.After(time.Duration(200+rng.IntN(800)) * time.Millisecond):
			}
			mu.Lock()
			proc.kill()
			kills++
			proc, killerErr = startServeProc(bin, dataDir, port)
			mu.Unlock()
			if killerErr != nil {
				return
			}
		}
	}()
	for i := 0; i < total; i++ {
		cmd := &commands.RegisterSnapshot{Meta: commands.Meta{ID: fmt.Sprintf("crash-%05d", i)}, // serve: its clock only
			Model: "crash", Version: fmt.Sprintf("v%d", i), Cron: "@hourly", Start: t0}
		for attempt := 0; ; attempt++ {
			mu.Lock()
			down := killerErr
			mu.Unlock()
			if down != nil {
				t.Fatalf("restarting the engine: %v", down)
			}
			if attempt > 500 || ctx.Err() != nil {
				t.Fatalf("%s: not acknowledged after %d attempts", cmd.ID, attempt)
			}
			r, err := client.Do(ctx, cmd)
			if err == nil && r.Accepted {
				break
			}
			time.Sleep(10 * time.Millisecond) // retry pacing, bounded by the attempt count
		}
	}
	stopKiller()
	<-killerDone
	if killerErr != nil {
		t.Fatal(killerErr)
	}
	// One last kill, then a clean start and stop: it folds what the kills
	// left and writes a checkpoint on the way out.
	mu.Lock()
	proc.kill()
	if proc, err = startServeProc(bin, dataDir, port); err == nil {
		err = proc.stop()
	}
	proc = nil
	mu.Unlock()
	if err != nil {
		t.Fatalf("clean restart: %v", err)
	}
	if kills == 0 {
		t.Fatal("the engine was never killed")
	}

	e := open(t, engine.Config{}, nodeOn(t, dataDir))
	recs, err := jstest.ReadLog(ctx, e.Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, r := range recs {
		if r.Err != nil {
			t.Fatalf("undecodable event at seq %d: %v", r.Seq, r.Err)
		}
		if _, ok := r.Event.Payload.(events.SnapshotRegistered); ok {
			stored[r.Event.Causation]++
		}
	}
	for i := 0; i < total; i++ {
		if id := fmt.Sprintf("crash-%05d", i); stored[id] != 1 {
			t.Fatalf("acknowledged %s is stored %d times", id, stored[id])
		}
	}
	if st := e.Stats(); st.CheckpointSeq == 0 || st.Folded != 0 {
		t.Fatalf("the reopened engine did not start from the clean stop's checkpoint: %+v", st)
	}
	rebuilt, _ := json.Marshal(replay.Fold(recs))
	var live []byte
	e.Projection().Read(func(st *projections.State) { live, _ = json.Marshal(st) })
	if string(live) != string(rebuilt) {
		t.Fatal("restored projections differ from a fold from scratch")
	}
	t.Logf("%d commands acknowledged across %d SIGKILLs; each stored once; restored state (checkpoint at %d) equals a fresh fold",
		total, kills, e.Stats().CheckpointSeq)
}
