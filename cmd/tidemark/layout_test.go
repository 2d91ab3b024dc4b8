package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/pgtest"
)

// TestLayoutsRefused: each layout that cannot work is refused at start,
// exit 2, with a message naming the flags, why, and the supported
// layouts, before it opens anything (on the old code each of them started
// and never swapped a view).
func TestLayoutsRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// serve owning a DuckDB file without the built-in worker: nobody can
	// compute into it.
	dir := t.TempDir()
	file := filepath.Join(dir, "serve.duckdb")
	_, stderr, code := runCLIWithin(ctx, "serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:-1", "--http", "", "--no-sync", "--warehouse", file)
	for _, want := range []string{"--warehouse " + file + " without --builtin-worker", "one process owns a DuckDB file", "add --builtin-worker", "supported layouts"} {
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Fatalf("serve --warehouse FILE: exit %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused serve created %s: %v", file, err)
	}

	// A worker on a DuckDB file, against a serve without a warehouse (and
	// against none at all): serve could never swap its views.
	s := startServe(t)
	wfile := filepath.Join(t.TempDir(), "w.duckdb")
	for _, url := range []string{s.nats, "nats://127.0.0.1:1"} {
		_, stderr, code = runCLIWithin(ctx, "worker", "--nats-url", url, "--warehouse", wfile)
		for _, want := range []string{"--warehouse " + wfile + ": a DuckDB file is owned by the one process", "tidemark serve --builtin-worker --warehouse " + wfile, "supported layouts"} {
			if code != exitUsage || !strings.Contains(stderr, want) {
				t.Fatalf("worker --warehouse FILE (%s): exit %d, stderr lacks %q:\n%s", url, code, want, stderr)
			}
		}
	}
	if _, err := os.Stat(wfile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused worker created %s: %v", wfile, err)
	}

	// A Postgres worker joining a serve that has no warehouse.
	_, stderr, code = runCLIWithin(ctx, "worker", "--nats-url", s.nats, "--warehouse", dsn)
	for _, want := range []string{"serve has no warehouse", "views would never be swapped", "start serve with --warehouse " + dsn, "supported layouts"} {
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Fatalf("worker --warehouse postgres against serve without one: exit %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("a refusal waited for the timeout")
	}
}

// logBuffer is a worker process's log, written by its stderr's copier and
// read by the test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startWorkerProcess runs `tidemark worker args…` as a process of its own
// (this test binary, TestWorkerProcessHelper), killed (and first resumed,
// if the test stopped it) when the test ends; its log goes to the test's
// stderr and to the buffer returned.
func startWorkerProcess(t *testing.T, args ...string) (*exec.Cmd, *logBuffer) {
	t.Helper()
	log := &logBuffer{}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcessHelper$")
	cmd.Env = append(os.Environ(), "TIDEMARK_HELPER_ARGS="+strings.Join(append([]string{"worker"}, args...), "\n"))
	cmd.Stderr = io.MultiWriter(log, os.Stderr)
	if testing.Verbose() {
		cmd.Stdout = os.Stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, log
}

// TestLayoutPostgresWorkerProcesses: the many-workers layout, for real.
// serve --warehouse postgres://… and two `tidemark worker --warehouse
// postgres://…` processes on the same database: the workers compute a
// plan's backfill, the promotion swaps prod's views (serve's syncer), and
// prod's view, read through serve (`tidemark query`), shows every row.
func TestLayoutPostgresWorkerProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := startServe(t, "--warehouse", dsn)
	for _, name := range []string{"p1", "p2"} {
		startWorkerProcess(t, "--nats-url", s.nats, "--warehouse", dsn, "--name", name, "--heartbeat", "100ms", "--log-format", "json")
	}
	eventually(t, "both worker processes live on /metrics", time.Minute, func() bool {
		m := get(t, s.http+"/metrics")
		return strings.Contains(m, `worker="p1"`) && strings.Contains(m, `worker="p2"`)
	})
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	applyAndPlan(t, s.nats, sqlModels(t, start), "d1")
	backfilled(t, s.nats, "worker:p")
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "ACCEPTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	hours := int(time.Now().UTC().Truncate(time.Hour).Sub(start) / time.Hour)
	want := "n\n" + strconv.Itoa(60*hours) + "\n"
	eventually(t, "prod's view, read through serve, shows the workers' rows", time.Minute, func() bool {
		out, _, _ := runCLI(t, "query", "SELECT count(*) AS n FROM prod.page_views", "--nats-url", s.nats, "-o", "csv")
		return out == want
	})
	out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "prod.page_views: ok (0 rows") || !strings.Contains(out, "prod.rollup: ok (0 rows") {
		t.Fatalf("verify: exit %d %s %s", code, out, stderr)
	}
}
