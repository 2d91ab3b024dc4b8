package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/events"
)

// The other waits, interrupted (their context ended: Ctrl-C), say what
// stays: promote's wait for a catch-up, restate's for its recompute. A
// wait that runs out still says so.
func TestWaitsInterrupted(t *testing.T) {
	s := startServe(t)
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	gone, cancel := context.WithCancel(t.Context())
	cancel()

	_, err = awaitDecision(gone, nc, "p1", 0, time.Minute)
	if exitCode(err) != exitFailed || err == nil || !strings.Contains(err.Error(), "interrupted: plan p1 is catching up and stays") ||
		!strings.Contains(err.Error(), "`tidemark promote p1` records its decision") {
		t.Fatalf("promote's wait interrupted: %v (exit %d)", err, exitCode(err))
	}
	if _, err = awaitDecision(t.Context(), nc, "p1", 0, time.Millisecond); err == nil || !strings.Contains(err.Error(), "no decision for p1 within 1ms") {
		t.Fatalf("promote's wait run out: %v", err)
	}

	req := &events.RestatementRequested{Env: "prod", Model: "events"}
	err = awaitRestate(gone, nc, req, 7, time.Minute, io.Discard)
	if exitCode(err) != exitFailed || err == nil || !strings.Contains(err.Error(), "interrupted: the restatement of events in prod (seq 7) is recorded and stays") {
		t.Fatalf("restate's wait interrupted: %v (exit %d)", err, exitCode(err))
	}
}
