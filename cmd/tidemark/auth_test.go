package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeWithAuth: `serve --auth docs/auth.conf --user admin` with every
// shipped client as its own user of that file: the CLI as service, the
// worker as worker, replay, audit and status --at as auditor (each with
// its own inbox prefix; the auditor creates no consumer).
func TestServeWithAuth(t *testing.T) {
	s := startServe(t, "--auth", "../../docs/auth.conf", "--user", "admin", "--password", "admin-change-me")
	as := func(role string) string {
		return strings.Replace(s.nats, "nats://", "nats://"+role+":"+role+"-change-me@", 1)
	}
	runs := filepath.Join(t.TempDir(), "runs.log")
	startWorker(t, as("worker"), `echo "$TIDEMARK_RUN_KIND $TIDEMARK_MODEL" >> `+runs)
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	if out, stderr, code := runCLI(t, "apply", "-f", modelFile(t, start, ""), "--nats-url", as("service"), "-o", "json"); code != 0 {
		t.Fatalf("apply as service: exit %d %s %s", code, out, stderr)
	}
	out, _, code := runCLI(t, "status", "--nats-url", as("service"), "-o", "json")
	if code != 0 {
		t.Fatalf("status as service: exit %d %s", code, out)
	}
	version := ""
	if out, stderr, code := runCLI(t, "apply", "-f", modelFile(t, start, ""), "--nats-url", as("service")); code != 0 {
		t.Fatalf("re-apply as service: exit %d %s %s", code, out, stderr)
	} else if i := strings.Index(out, "events@"); i >= 0 {
		version = strings.Fields(out[i+len("events@"):])[0]
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events="+version, "--id", "d1", "--nats-url", as("service")); code != 0 {
		t.Fatalf("plan as service: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the worker (as worker) runs the backfill", time.Minute, func() bool {
		b, _ := os.ReadFile(runs)
		return strings.Contains(string(b), "backfill events")
	})
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", as("service")); code != 0 || !strings.Contains(out, "d1: ACCEPTED") {
		t.Fatalf("promote as service: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "replay", "--nats-url", as("auditor"), "--verify"); code != 0 || !strings.Contains(out, "0 divergence(s)") {
		t.Fatalf("replay as auditor: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "audit", "--nats-url", as("auditor"), "--plan", "d1"); code != 0 || !strings.Contains(out, "d1 accepted") {
		t.Fatalf("audit as auditor: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "status", "--nats-url", as("auditor"), "--at", time.Now().UTC().Add(time.Minute).Format(time.RFC3339)); code != 0 || !strings.Contains(out, "prod") {
		t.Fatalf("status --at as auditor: exit %d %s %s", code, out, stderr)
	}
}
