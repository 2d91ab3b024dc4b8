package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/spf13/pflag"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/server"
)

// served is `tidemark serve` running in-process on random loopback ports.
type served struct {
	nats, http, dataDir string
	stop                func()
}

// startServe opens, runs and (at the test's end, or stop) closes a
// server as serve does (serve.go's serve), from serve's flags: the
// defaults below, then extra.
func startServe(t *testing.T, extra ...string) *served {
	t.Helper()
	s := &served{dataDir: t.TempDir()}
	sf := &serveFlags{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	bindServeFlags(fs, sf)
	if err := fs.Parse(append([]string{"--data-dir", s.dataDir, "--listen", "127.0.0.1:-1", "--http", "127.0.0.1:0", "--no-sync", "--log-format", "json"}, extra...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := sf.config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	s.nats, s.http = srv.NATSURL(), srv.DashboardURL()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s")
			return
		}
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("serve: close: %v", err)
		}
	}
	t.Cleanup(s.stop)
	return s
}

// startWorker runs `tidemark worker` in-process until the test ends
// (startWorkerStop, not stopped before).
func startWorker(t *testing.T, natsURL, command string) {
	t.Helper()
	startWorkerStop(t, natsURL, command)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond) // re-checking a condition, bounded by the deadline
	}
}

func modelFile(t *testing.T, start time.Time, extra string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "models.yaml")
	body := "models:\n  - name: events\n    cron: \"@hourly\"\n    start: " + start.Format(time.RFC3339) + "\n" + extra
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunItForReal: serve, apply a model file, a worker running a real
// shell command, plan and promote through the CLI, then status, repairs,
// metrics and the audit; and the bad inputs, each with its exact error.
func TestRunItForReal(t *testing.T) {
	s := startServe(t)
	runs := filepath.Join(t.TempDir(), "runs.log")
	startWorker(t, s.nats, `echo "$TIDEMARK_RUN_KIND $TIDEMARK_MODEL@$TIDEMARK_VERSION $TIDEMARK_START $TIDEMARK_END" >> `+runs+`; sleep 0.1`)
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	models := modelFile(t, start, "")

	out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats, "-o", "json")
	var applied []struct {
		Snapshot   string `json:"snapshot"`
		Registered bool   `json:"registered"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil || len(applied) != 1 || !applied[0].Registered {
		t.Fatalf("apply: exit %d %v %s %s", code, err, out, stderr)
	}
	snapshot := applied[0].Snapshot
	version := strings.TrimPrefix(snapshot, "events@")
	if out, _, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 || !strings.Contains(out, "unchanged  "+snapshot) || !strings.Contains(out, "0 registered") {
		t.Fatalf("re-apply: exit %d %s", code, out)
	}

	// --wait: nothing is promoted empty, so the promote comes once the
	// backfill is computed, not merely started.
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events="+version, "--id", "d1", "--wait", "1m", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "plan d1 for prod") {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	backfilled := "backfill " + snapshot + " " + start.Format(time.RFC3339)
	eventually(t, "the worker runs the backfill", time.Minute, func() bool {
		b, _ := os.ReadFile(runs)
		return strings.Contains(string(b), backfilled)
	})
	out, stderr, code = runCLI(t, "promote", "d1", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "d1: ACCEPTED [no_gaps]") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	ready := start.Add(3 * time.Hour)
	var status struct {
		Envs []commands.EnvStatus `json:"envs"`
	}
	eventually(t, "status shows the backfilled incumbent", time.Minute, func() bool {
		out, _, code := runCLI(t, "status", "--nats-url", s.nats, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &status) == nil && len(status.Envs) == 1 &&
			status.Envs[0].Models[0].Snapshot == snapshot && !status.Envs[0].Models[0].Frontier.Before(ready)
	})
	if out, _, code := runCLI(t, "repairs", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "no open repair debt") {
		t.Fatalf("repairs: exit %d %s", code, out)
	}
	resp, err := http.Get(s.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tidemark_commands_total{kind="promote",outcome="accepted"} 1`, `tidemark_commands_total{kind="complete_work",outcome="accepted"}`,
		`tidemark_worker_runs_total{run_kind="backfill"}`, `tidemark_decisions_total{code="no_gaps"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}

	// Bad inputs.
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	os.WriteFile(broken, []byte("models:\n  - name: events\n    cron: \"* * * * *\"\n    start: 2026-12-01T00:00:00Z\n"), 0o644)
	if _, stderr, code := runCLI(t, "apply", "-f", broken, "--nats-url", s.nats); code != 2 || !strings.Contains(stderr, broken+":3: models[0].cron: interval: invalid schedule") {
		t.Fatalf("bad cron: exit %d %s", code, stderr)
	}
	os.WriteFile(broken, []byte("models:\n  - name: [events\n"), 0o644)
	if _, stderr, code := runCLI(t, "apply", "-f", broken, "--nats-url", s.nats); code != 2 || !strings.Contains(stderr, broken+":") {
		t.Fatalf("broken yaml: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "nope=v1", "--nats-url", s.nats); code != exitNotFound || !strings.Contains(stderr, "build_plan rejected: not_found: versions.nope: snapshot nope@v1 is not registered") {
		t.Fatalf("unknown model: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "status", "--nats-url", "nats://127.0.0.1:1"); code != exitUnreachable || !strings.Contains(stderr, "cannot reach the tidemark server at nats://127.0.0.1:1") {
		t.Fatalf("unreachable: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events", "--nats-url", s.nats); code != 2 || !strings.Contains(stderr, `--set "events": want MODEL=VERSION`) {
		t.Fatalf("bad --set: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "worker", "--nats-url", s.nats); code != 2 || !strings.Contains(stderr, "exactly one of --exec") {
		t.Fatalf("worker without --exec: exit %d %s", code, stderr)
	}

	s.stop()
	out, _, code = runCLI(t, "audit", "--data-dir", s.dataDir, "-o", "json")
	if code != 0 {
		t.Fatalf("audit: exit %d", code)
	}
	var sawBackfill, sawDecision bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Type, Actor, Summary string
		}
		json.Unmarshal([]byte(line), &r)
		sawBackfill = sawBackfill || (r.Type == "IntervalsCompleted" && strings.HasPrefix(r.Actor, "worker:") && strings.Contains(r.Summary, "(backfill)"))
		sawDecision = sawDecision || (r.Type == "PromotionDecided" && strings.Contains(r.Summary, "d1 accepted [no_gaps]"))
	}
	if !sawBackfill || !sawDecision {
		t.Fatalf("audit lacks the worker's backfill or the decision:\n%s", out)
	}
}

// chromium returns the browser to drive, or skips when there is none and
// the run does not require one (.ci/run does).
func chromium(t *testing.T) string {
	for _, p := range []string{os.Getenv("TIDEMARK_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := exec.LookPath(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("TIDEMARK_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium found and TIDEMARK_REQUIRE_BROWSER is set")
	}
	t.Skip("no chromium: install Debian's chromium package to run the browser test")
	return ""
}

// TestDashboardInBrowser: the dashboard in headless Chromium shows a
// promotion done through the CLI without a reload, with the lineage; at
// 1,400 px the dashboard in each window, a plan's page (accepted, and in
// flight with its failure), and a decision's page (accepted, and a
// rejection saying what to do next) fit the width; a screenshot is saved.
func TestDashboardInBrowser(t *testing.T) {
	browser := chromium(t)
	s := startServe(t)
	// Every model's work succeeds but clicks', which fails.
	startWorker(t, s.nats, `[ "$TIDEMARK_MODEL" != clicks ] || { echo "clicks: upstream export missing" >&2; exit 3; }`)
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	models := modelFile(t, start, "  - name: clicks\n    cron: \"@hourly\"\n    start: "+start.Format(time.RFC3339)+"\n")
	out, _, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats, "-o", "json")
	var applied []struct{ Snapshot string }
	if json.Unmarshal([]byte(out), &applied); code != 0 || len(applied) != 2 {
		t.Fatalf("apply: %d %s", code, out)
	}
	var eventsSnap, clicksSnap string
	for _, a := range applied {
		if strings.HasPrefix(a.Snapshot, "events@") {
			eventsSnap = a.Snapshot
		} else {
			clicksSnap = a.Snapshot
		}
	}
	version := strings.TrimPrefix(eventsSnap, "events@")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelT()
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(s.http+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
		t.Fatal(err)
	}
	before, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#content")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, "No decision recorded yet") {
		t.Fatalf("page before the promotion:\n%s", before)
	}
	if _, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events="+version, "--id", "d1", "--wait", "1m", "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan: %s", stderr)
	}
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 {
		t.Fatalf("promote: %s %s", out, stderr)
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`article[data-plan="d1"][data-outcome="accepted"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-snapshot="`+eventsSnap+`"] svg.timeline`))); err != nil {
		t.Fatal(err)
	}
	decision, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`article[data-plan="d1"]`)))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(decision, "ACCEPTED") || !strings.Contains(decision, "no_gaps") {
		t.Fatalf("decision on the page: %q", decision)
	}
	// At 1,400 px the page, in each window, its plan's page and its
	// decision's page fit the width (no sideways scroll), no time wraps,
	// and every coverage bar spans one axis.
	onScreen := func(what string) {
		t.Helper()
		fits, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => { const e = document.scrollingElement; return e.scrollWidth + " of " + e.clientWidth; })()`))
		if err != nil {
			t.Fatal(err)
		}
		var sw, cw int
		if _, err := fmt.Sscanf(fits, "%d of %d", &sw, &cw); err != nil || sw > cw || cw < 1300 {
			t.Errorf("%s scrolls sideways at 1,400 px: %s (%v)", what, fits, err)
		}
		wrapped, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => { const ts = Array.from(document.querySelectorAll("time"));
			return ts.length + " times; wrapped: " + ts.filter(t => t.getClientRects().length !== 1).map(t => t.textContent).join(", "); })()`))
		if err != nil || !strings.HasSuffix(wrapped, "wrapped: ") || strings.HasPrefix(wrapped, "0 times") {
			t.Errorf("%s: %q (%v), want times, none wrapped", what, wrapped, err)
		}
	}
	onScreen("the dashboard")
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`svg.lineage g.node.ok[data-model="events"]`))); err != nil {
		t.Fatalf("the lineage: %v", err)
	}
	for _, w := range []string{"24h", "7d", "all"} {
		if err := chromedp.Do(bctx, chromedp.Navigate(s.http+"/?window="+w), chromedp.WaitVisible(chromedp.CSS("#conn.live")),
			chromedp.WaitVisible(chromedp.CSS(`b.window[data-window="`+w+`"]`))); err != nil {
			t.Fatalf("window %s: %v", w, err)
		}
		axes, err := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.from(new Set(Array.from(document.querySelectorAll("svg.timeline")).map(s => s.dataset.start + "/" + s.dataset.end))).join(" ")`))
		if err != nil || strings.Count(axes, "/") != 1 {
			t.Errorf("window %s: the bars' axes %q (%v), want one", w, axes, err)
		}
		onScreen("the dashboard of " + w)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(s.http+"/plans/d1"), chromedp.WaitVisible(chromedp.CSS(`tr[data-progress="events"][data-percent="100"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.plan-decision article[data-outcome="accepted"]`))); err != nil {
		t.Fatalf("the plan's page: %v", err)
	}
	onScreen("the plan's page")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`.plan-decision h3 a`)), chromedp.WaitVisible(chromedp.CSS(`article.decision[data-outcome="accepted"]`))); err != nil {
		t.Fatalf("the decision's page: %v", err)
	}
	onScreen("the decision's page")
	// A plan whose work fails stays in flight: its page shows the
	// failure's text; promoted, it is rejected, and the rejection's page
	// says what to do next.
	if _, stderr, code := runCLI(t, "plan", "--env", "dev", "--set", "clicks="+strings.TrimPrefix(clicksSnap, "clicks@"), "--id", "d2", "--wait", "1m", "--nats-url", s.nats); code != 1 {
		t.Fatalf("plan d2: exit %d, want 1 (its work given up): %s", code, stderr)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(s.http+"/plans/d2"), chromedp.WaitVisible(chromedp.CSS(`section.progress[data-in-flight="true"] tr[data-progress="clicks"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.plan-failures .failure[data-model="clicks"][data-final="true"]`))); err != nil {
		t.Fatalf("the page of a plan in flight: %v", err)
	}
	failure, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`.plan-failures .failure`)))
	if err != nil || !strings.Contains(failure, "exit status 3") {
		t.Errorf("the failure on the plan's page: %q (%v)", failure, err)
	}
	onScreen("the page of a plan in flight")
	if err := chromedp.Do(bctx, chromedp.Navigate(s.http+"/"), chromedp.WaitVisible(chromedp.CSS(`li[data-inflight="d2"] .failure[data-model="clicks"]`))); err != nil {
		t.Fatalf("the dashboard with a failing plan: %v", err)
	}
	onScreen("the dashboard with a failing plan")
	if _, _, code := runCLI(t, "promote", "d2", "--nats-url", s.nats); code != 1 {
		t.Fatalf("promote d2: exit %d, want 1 (rejected)", code)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(s.http+"/plans/d2"), chromedp.WaitVisible(chromedp.CSS(`.plan-decision article[data-outcome="rejected"]`)),
		chromedp.Click(chromedp.CSS(`.plan-decision h3 a`)), chromedp.WaitVisible(chromedp.CSS(`section.next-steps li.next-step`))); err != nil {
		t.Fatalf("the rejection's page: %v", err)
	}
	next, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`section.next-steps`)))
	if err != nil || !strings.Contains(next, "tidemark promote d2") {
		t.Errorf("the rejection's next step: %q (%v)", next, err)
	}
	onScreen("the rejection's page")
	dir := os.Getenv("TIDEMARK_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}
