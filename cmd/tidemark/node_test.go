package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeTools returns the paths of node and npm, or skips the test when
// either is missing (fails under TIDEMARK_REQUIRE_NODE, which .ci/run
// sets).
func nodeTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode == nil && errNpm == nil {
		return node, npm
	}
	if os.Getenv("TIDEMARK_REQUIRE_NODE") != "" {
		t.Fatal("node or npm not found and TIDEMARK_REQUIRE_NODE is set")
	}
	t.Skip("no node/npm: install Debian's nodejs and npm packages to run the Node client's tests")
	return "", ""
}

// runIn runs a command in dir within d and fails the test with its output
// when it fails.
func runIn(t *testing.T, dir string, d time.Duration, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v in %s: %v\n%s", filepath.Base(name), args, dir, err, out)
	}
}

// TestNodeClient runs the Node client's tests (clients/node, node's test
// runner) against a real serve, then checks that the events the client
// read, group messages expanded, are the stream's as eventlog reads it:
// the same addresses (seq, index), subjects, ids and types.
func TestNodeClient(t *testing.T) {
	node, npm := nodeTools(t)
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); os.IsNotExist(err) {
		runIn(t, dir, 5*time.Minute, nil, npm, "ci", "--no-audit", "--no-fund")
	}
	runIn(t, dir, 2*time.Minute, nil, npm, "run", "--silent", "typecheck")

	// Under docs/auth.conf: the tests act as admin, and as the service and
	// auditor roles.
	s := startServe(t, "--auth", "../../docs/auth.conf", "--user", "admin", "--password", "admin-change-me")
	admin := strings.Replace(s.nats, "nats://", "nats://admin:admin-change-me@", 1)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	runIn(t, dir, 3*time.Minute, []string{"TIDEMARK_NATS_URL=" + admin, "TIDEMARK_AUTH_CONF=1", "TIDEMARK_NODE_EVENTS_OUT=" + out}, node, "--test", "test/unit.test.js", "test/serve.test.js")

	type address struct {
		Seq          uint64
		Index, Count int
		Subject      string
		ID, Type     string
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("the node tests wrote no events: %v", err)
	}
	defer f.Close()
	var got []address
	groups := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a address
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if a.Count > 1 {
			groups++
		}
		got = append(got, a)
	}
	if groups == 0 {
		t.Fatal("the node client read no group message of more than one event")
	}

	recs := readEvents(t, admin)
	var want []address
	for _, r := range recs {
		if r.Err != nil {
			t.Fatalf("(%d, %d): %v", r.Seq, r.Index, r.Err)
		}
		if r.Seq > got[len(got)-1].Seq {
			break // appended after the node test read the stream
		}
		want = append(want, address{r.Seq, r.Index, r.Count, r.Subject, r.Event.ID, string(r.Event.Payload.EventType())})
	}
	if len(got) != len(want) {
		t.Fatalf("node read %d events, eventlog %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: node read %+v, eventlog %+v", i, got[i], want[i])
		}
	}
}
