package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
)

// lines collects what a command writes, line by line, for a test to wait
// for.
type lines struct {
	mu    sync.Mutex
	all   []string
	more  chan struct{}
	ended bool
}

func follow(r io.Reader) *lines {
	l := &lines{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
		l.mu.Lock()
		l.ended = true
		l.mu.Unlock()
		close(l.more)
	}()
	return l
}

// await waits, up to d, for a line matching re and returns it.
func (l *lines) await(t *testing.T, re string, d time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if rx.MatchString(s) {
				l.mu.Unlock()
				return s
			}
		}
		text, ended := strings.Join(l.all, "\n"), l.ended
		l.mu.Unlock()
		if ended {
			t.Fatalf("no line matches %q; the command ended after:\n%s", re, text)
		}
		select {
		case <-l.more:
		case <-deadline.C:
			t.Fatalf("no line matches %q within %s:\n%s", re, d, text)
		}
	}
}

// count is how many lines are s.
func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.all {
		if x == s {
			n++
		}
	}
	return n
}

// TestPlanWaitShowsModels: plan --wait, its stderr not a terminal, prints
// per model of the plan its batches done, intervals, rows, rate and ETA,
// a line each time they change: the test is the worker, completing the
// backfill's work a day at a time with the rows it wrote.
func TestPlanWaitShowsModels(t *testing.T) {
	s := startServe(t) // no worker: the test reports the work done
	today := time.Now().UTC().Truncate(24 * time.Hour)
	start := today.AddDate(0, 0, -2)
	models := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(models, []byte("models:\n  - name: events\n    version: v1\n    cron: \"@daily\"\n    start: "+start.Format(time.RFC3339)+
		"\n  - name: rollup\n    version: v1\n    cron: \"@daily\"\n    start: "+start.Format(time.RFC3339)+"\n    depends_on: [events]\n"), 0o644)
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root := newRootCmd()
	or, ow := io.Pipe()
	er, ew := io.Pipe()
	root.SetOut(ow)
	root.SetErr(ew)
	root.SetArgs([]string{"plan", "--env", "prod", "--set", "events=v1,rollup=v1", "--id", "w1", "--nats-url", s.nats, "--wait", "1m"})
	waited := make(chan error, 1)
	go func() { waited <- root.ExecuteContext(ctx); ow.Close(); ew.Close() }()
	errLines := follow(er)
	// The plan's first line names its sequence: the backfill item's id.
	first, err := bufio.NewReader(or).ReadString('\n')
	m := regexp.MustCompile(`^plan w1 for prod built at generation \d+ \(policy strict, seq (\d+)\)`).FindStringSubmatch(first)
	if err != nil || m == nil {
		t.Fatalf("plan said %q (%v)", first, err)
	}
	go io.Copy(io.Discard, or)
	seq, _ := strconv.ParseUint(m[1], 10, 64)
	item := events.WorkID(seq, events.RunBackfill)

	// Nothing done: no pace yet.
	for _, model := range []string{"events", "rollup"} {
		errLines.await(t, `^plan w1: `+model+`@v1 backfill: batches 0/1, intervals 0/2, 0 rows, ETA unknown$`, time.Minute)
	}
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := transport.NewClient(nc)
	complete := func(model string, day int, rows int64) {
		t.Helper()
		r := interval.R(start.AddDate(0, 0, day), start.AddDate(0, 0, day+1))
		if rep, err := c.Do(ctx, &commands.CompleteIntervals{Model: model, Version: "v1", Ranges: []interval.Range{r}, Work: item, Rows: rows}); err != nil || !rep.Accepted {
			t.Fatalf("complete %s day %d: %+v %v", model, day, rep, err)
		}
	}
	// Half of events' one batch: an interval of two, 60 rows, a pace and
	// so an ETA.
	complete("events", 0, 60)
	errLines.await(t, `^plan w1: events@v1 backfill: batches 0/1, intervals 1/2, 60 rows, [0-9.]+ rows/s, [0-9.]+ intervals/s, ETA [0-9.]+(ms|s|m[0-9]+s)$`, time.Minute)
	complete("events", 1, 40)
	complete("rollup", 0, 1)
	complete("rollup", 1, 1)
	errLines.await(t, `^plan w1: events@v1 backfill: batches 1/1, intervals 2/2, 100 rows, [0-9.]+ rows/s, [0-9.]+ intervals/s, ETA 0s$`, time.Minute)
	errLines.await(t, `^plan w1: backfill complete$`, time.Minute)
	if err := <-waited; err != nil {
		t.Fatalf("plan --wait: %v", err)
	}
	// A line per change: rollup's first figures were printed once, while
	// the test waited on events.
	if n := errLines.count("plan w1: rollup@v1 backfill: batches 0/1, intervals 0/2, 0 rows, ETA unknown"); n != 1 {
		t.Fatalf("rollup's unchanged figures printed %d times", n)
	}

	// status shows the same figures under the plan, while in flight.
	out, _, _ := runCLI(t, "status", "--nats-url", s.nats)
	if !regexp.MustCompile(`(?m)^  rollup@v1 backfill: batches 1/1, intervals 2/2, 2 rows, [0-9.]+ rows/s, [0-9.]+ intervals/s, ETA 0s$`).MatchString(out) {
		t.Fatalf("status lacks rollup's progress:\n%s", out)
	}
}

// Ctrl-C during plan --wait says the plan stays, with the command that
// waits again; that command resumes the wait for the plan built before,
// which ends once its backfill is computed. A plan the stream does not
// hold is exit 3.
func TestPlanWaitInterruptedAndResumed(t *testing.T) {
	s := startServe(t) // no worker: the test reports the work done
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	models := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(models, []byte("models:\n  - name: events\n    version: v1\n    cron: \"@daily\"\n    start: "+start.Format(time.RFC3339)+"\n"), 0o644)
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	// The CLI as a user runs it; its context's end is Ctrl-C.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := newRootCmd()
	var out bytes.Buffer
	er, ew := io.Pipe()
	root.SetOut(&out)
	root.SetErr(ew)
	root.SetArgs([]string{"plan", "--env", "prod", "--set", "events=v1", "--id", "w1", "--nats-url", s.nats, "--wait", "10m"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); ew.Close() }()
	errLines := follow(er)
	errLines.await(t, `^plan w1: backfill 0s of 24h0m0s \(0%\)$`, time.Minute) // waiting
	cancel()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(time.Minute):
		t.Fatal("plan --wait did not return within a minute of its context's end")
	}
	r := struct {
		out, stderr string
		code        int
	}{out.String(), fmt.Sprint(werr), exitCode(werr)}
	m := regexp.MustCompile("plan w1 is built and stays; its backfill goes on: `(tidemark plan --wait 10m0s w1 --nats-url [^`]+)` waits again").FindStringSubmatch(r.stderr)
	if r.code != exitFailed || m == nil || !strings.Contains(r.stderr, "`tidemark promote w1 --nats-url "+s.nats+"` once it is computed") {
		t.Fatalf("interrupted: exit %d %s %s", r.code, r.out, r.stderr)
	}
	seqs := regexp.MustCompile(`\(policy strict, seq (\d+)\)`).FindStringSubmatch(r.out)
	if seqs == nil {
		t.Fatalf("plan printed %q", r.out)
	}
	seq, _ := strconv.ParseUint(seqs[1], 10, 64)

	// Nothing computes it: the resumed wait gives up, as a wait does.
	args := strings.Fields(m[1])[1:]
	args[2] = "300ms"
	if _, stderr, code := runCLI(t, args...); code != exitFailed || !strings.Contains(stderr, "--wait: plan w1's backfill is not computed after 300ms") {
		t.Fatalf("%v: exit %d %s", args, code, stderr)
	}
	// The test computes it: the command the message gave ends.
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rg := interval.R(start, start.AddDate(0, 0, 1)) // the backfill: yesterday
	if rep, err := transport.NewClient(nc).Do(t.Context(), &commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{rg}, Work: events.WorkID(seq, events.RunBackfill)}); err != nil || !rep.Accepted {
		t.Fatalf("complete: %+v %v", rep, err)
	}
	if _, stderr, code := runCLI(t, strings.Fields(m[1])[1:]...); code != 0 || !strings.Contains(stderr, "plan w1: backfill complete") {
		t.Fatalf("%s: exit %d %s", m[1], code, stderr)
	}

	// Interrupted before the build's reply: the plan may be built.
	gone, stop := context.WithCancel(t.Context())
	stop()
	if _, stderr, code := runCLIWithin(gone, "plan", "--env", "prod", "--set", "events=v1", "--id", "w2", "--nats-url", s.nats); code != exitFailed ||
		!strings.Contains(stderr, "interrupted while plan w2 was being built: it may be built") {
		t.Fatalf("interrupted build: exit %d %s", code, stderr)
	}

	checkExits(t, []exitCase{
		{"unknown plan", []string{"plan", "--wait", "1m", "nope", "--nats-url", s.nats}, exitNotFound, `no plan "nope"`},
		{"bad plan name", []string{"plan", "--wait", "1m", "p 1", "--nats-url", s.nats}, exitUsage, "invalid: plan"},
		{"no --wait", []string{"plan", "w1", "--nats-url", s.nats}, exitUsage, "give --wait D"},
		{"a building flag", []string{"plan", "--wait", "1m", "--env", "prod", "w1", "--nats-url", s.nats}, exitUsage, "--env builds one"},
	})
}
