package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/replay"
)

// scenarioDir plays a scenario file with --data-dir and returns the dir.
func scenarioDir(t *testing.T, file string) string {
	t.Helper()
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "scenario", "run", "--data-dir", dir, filepath.Join("../../testdata/scenarios", file)); code != 0 {
		t.Fatalf("scenario run: exit %d: %s", code, stderr)
	}
	return dir
}

// copyStream writes the events of src, changed by edit, into a new
// stream in a new data dir (the original is append-only and stays as is).
func copyStream(t *testing.T, src string, edit func(*events.Event)) string {
	t.Helper()
	ctx := t.Context()
	from, err := openStore(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := jstest.ReadLog(ctx, from.JetStream())
	from.Close()
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	to, err := engine.Open(ctx, node.Conn(), engine.Config{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close(context.Background())
	for _, r := range recs {
		ev := r.Event
		edit(&ev)
		b, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.Log().JetStream().Publish(ctx, r.Subject, b); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestReplayVerify(t *testing.T) {
	dir := scenarioDir(t, "trailing-gap.yaml")
	out, stderr, code := runCLI(t, "replay", "--data-dir", dir, "--verify")
	if code != 0 || !strings.Contains(out, "0 divergence(s)") || !strings.Contains(out, "events@v2") {
		t.Fatalf("replay --verify: exit %d\n%s%s", code, out, stderr)
	}
	// The same history with the decision's trailing-gap bound set to 0 in
	// a copy: strict would have rejected it, and replay says so.
	tampered := copyStream(t, dir, func(ev *events.Event) {
		if d, ok := ev.Payload.(events.PromotionDecided); ok && d.Plan == "p1" {
			d.Policy.MaxTrailingGapAdvances = 0
			ev.Payload = d
		}
	})
	out, _, code = runCLI(t, "replay", "--data-dir", tampered, "--verify", "-o", "json")
	var res struct {
		Divergences []replay.Divergence `json:"divergences"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 1 || len(res.Divergences) == 0 || res.Divergences[0].Field != "outcome" || res.Divergences[0].Plan != "p1" ||
		res.Divergences[0].Recorded != "accepted" || res.Divergences[0].Recomputed != "rejected" {
		t.Fatalf("tampered copy: exit %d, %+v", code, res.Divergences)
	}
}

func TestAuditStatusExplain(t *testing.T) {
	dir := scenarioDir(t, "catch-up-then-allowance.yaml")
	out, stderr, code := runCLI(t, "audit", "--data-dir", dir, "--plan", "p1", "-o", "csv")
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range rows[1:] {
		types = append(types, r[2])
	}
	want := "PlanBuilt IntervalsCompleted CatchUpRequested IntervalsCompleted PromotionDecided EnvironmentFinalized RepairCompleted"
	if strings.Join(types, " ") != want {
		t.Fatalf("audit --plan p1 types:\n got  %s\n want %s", strings.Join(types, " "), want)
	}

	out, _, code = runCLI(t, "audit", "--data-dir", dir, "--model", "events", "--since", "2026-12-01T12:00:00Z", "--until", "2026-12-01T12:30:00Z", "-o", "json")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r replay.Row
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.At.Hour() != 12 {
			t.Fatalf("audit window: %v %s", err, line)
		}
	}
	if code != 0 || out == "" {
		t.Fatalf("audit window: exit %d", code)
	}

	out, _, code = runCLI(t, "status", "--data-dir", dir, "--at", "2026-12-01T11:30:00Z")
	if code != 0 || !strings.Contains(out, "events@v1") || strings.Contains(out, "events@v2  ") {
		t.Fatalf("status at 11:30: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "status", "--data-dir", dir, "-o", "json")
	var st struct {
		Envs []commands.EnvStatus `json:"envs"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Envs[0].Models[0].Snapshot != "events@v2" || st.Envs[0].Generation != 2 {
		t.Fatalf("status now: exit %d %v %s", code, err, out)
	}

	out, _, code = runCLI(t, "audit", "explain", "p1", "--data-dir", dir)
	for _, want := range []string{"ACCEPTED [trailing_gap_accepted]", "strict retry of the catch-up requested at seq",
		"events@v2 covers 2026-12-01T00:00:00Z/2026-12-01T11:00:00Z", "events@v1 covers 2026-12-01T00:00:00Z/2026-12-01T12:00:00Z", "the same decision"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explain lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	if _, stderr, code := runCLI(t, "audit", "explain", "nope", "--data-dir", dir); code != exitNotFound || !strings.Contains(stderr, `no plan "nope"`) {
		t.Fatalf("explain unknown plan: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "replay", "--data-dir", dir, "--nats-url", "nats://127.0.0.1:1"); code != exitUsage || !strings.Contains(stderr, "--data-dir") {
		t.Fatalf("replay on two stores: exit %d %s", code, stderr)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
