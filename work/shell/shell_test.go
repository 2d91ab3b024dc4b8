package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func hr(a, b int) interval.Range {
	return interval.R(t0.Add(time.Duration(a)*time.Hour), t0.Add(time.Duration(b)*time.Hour))
}

// syncBuffer is an Output both of a command's streams may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// reports is a commands.Handler that validates each command as the engine
// does first and records it (check_work apart, in checks); reject, when
// set, may refuse it instead.
type reports struct {
	mu     sync.Mutex
	cmds   []commands.Command
	checks []*commands.CheckWork
	reject func(commands.Command) error
}

func (h *reports) Handle(_ context.Context, cmd commands.Command) commands.Reply {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := cmd.Validate(); err != nil {
		return commands.Rejection(err)
	}
	if c, ok := cmd.(*commands.CheckWork); ok {
		h.checks = append(h.checks, c)
	} else {
		h.cmds = append(h.cmds, cmd)
	}
	if h.reject != nil {
		if err := h.reject(cmd); err != nil {
			return commands.Rejection(err)
		}
	}
	return commands.Reply{Accepted: true, Events: 1}
}

func (h *reports) ids() []string {
	var out []string
	for _, c := range h.cmds {
		out = append(out, c.Header().ID)
	}
	return out
}

func worker(h commands.Handler, command string) *Worker {
	w := &Worker{Handler: h, Command: command, Name: "w1", MaxAttempts: 3, AckWait: time.Hour,
		Backoff: []time.Duration{time.Second, time.Minute}, Output: &syncBuffer{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w.defaults()
	return w
}

func item() work.Item {
	return work.Item{ID: "work-12-backfill", RunKind: events.RunBackfill, Env: "prod", Plan: "p1", EventSeq: 12, At: t0,
		Steps: []work.Step{
			{Model: "a", Version: "v2", Snapshot: "a@v2", Ranges: []interval.Range{hr(0, 2), hr(4, 5)}, RunID: "backfill:p1"},
			{Model: "b", Version: "v1+p1", Snapshot: "b@v1+p1", Ranges: []interval.Range{hr(1, 3)}, RunID: "backfill:p1"},
		}}
}

// TestRunItemReportsEachBatch pins the completions: one complete_work per
// range, in order, naming the item, under "<item>/<step>/<range>" (no
// attempt: a batch computed again after a redelivery is recorded once).
func TestRunItemReportsEachBatch(t *testing.T) {
	h := &reports{}
	w := worker(h, "true")
	if err := w.runItem(t.Context(), item(), 2); err != nil {
		t.Fatal(err)
	}
	meta := func(id string) commands.Meta {
		return commands.Meta{ID: id, Actor: "worker:w1", Correlation: "backfill:p1"}
	}
	complete := func(id, model, version string, r interval.Range) commands.Command {
		return &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: meta(id), Model: model, Version: version,
			Ranges: []interval.Range{r}, RunKind: events.RunBackfill, RunID: "backfill:p1", Work: "work-12-backfill"}}
	}
	want := []commands.Command{
		complete("work-12-backfill/0/0", "a", "v2", hr(0, 2)),
		complete("work-12-backfill/0/1", "a", "v2", hr(4, 5)),
		complete("work-12-backfill/1/0", "b", "v1+p1", hr(1, 3)),
	}
	if !reflect.DeepEqual(h.cmds, want) {
		t.Errorf("reports:\n got %s\nwant %s", js(t, h.cmds), js(t, want))
	}

	// Another attempt (a redelivery) sends the same ids.
	again := &reports{}
	if err := worker(again, "true").runItem(t.Context(), item(), 3); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.ids(), h.ids()) {
		t.Errorf("attempt 3 ids %v, attempt 2 ids %v", again.ids(), h.ids())
	}
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExecEnv pins the batch's environment: every TIDEMARK_ variable, the
// range in RFC 3339 UTC whatever its zone.
func TestExecEnv(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	w := worker(&reports{}, fmt.Sprintf(`env | grep '^TIDEMARK_' > '%s'`, out))
	zone := time.FixedZone("UTC+2", 2*3600)
	r := interval.Range{Start: t0.Add(time.Hour).In(zone), End: t0.Add(2 * time.Hour).In(zone)}
	it := item()
	st := it.Steps[1]
	res := w.exec(t.Context(), it, st, r, 4)
	if res.err != nil || res.exit != 0 {
		t.Fatalf("exec: exit %d, err %v, stderr %q", res.exit, res.err, res.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"TIDEMARK_MODEL": "b", "TIDEMARK_VERSION": "v1+p1", "TIDEMARK_SNAPSHOT": "b@v1+p1",
		"TIDEMARK_START": "2024-01-01T01:00:00Z", "TIDEMARK_END": "2024-01-01T02:00:00Z",
		"TIDEMARK_RUN_KIND": "backfill", "TIDEMARK_RUN_ID": "backfill:p1", "TIDEMARK_ENV": "prod",
		"TIDEMARK_PLAN": "p1", "TIDEMARK_ATTEMPT": "4",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestRunItemFailure pins the failure report: fail_work for the failed
// batch only, under "<item>/<step>/<range>/<attempt>/failed", with the exit
// status, the error, the stderr tail and whether it is final; the batches
// after it are not run.
func TestRunItemFailure(t *testing.T) {
	// The command fails for the second range of the first step.
	cmd := `if [ "$TIDEMARK_START" = "2024-01-01T04:00:00Z" ]; then echo "boom $TIDEMARK_SNAPSHOT" >&2; exit 3; fi`
	for _, tt := range []struct {
		attempt int
		final   bool
	}{{1, false}, {2, false}, {3, true}, {4, true}} {
		t.Run(fmt.Sprintf("attempt %d", tt.attempt), func(t *testing.T) {
			h := &reports{}
			w := worker(h, cmd)
			err := w.runItem(t.Context(), item(), tt.attempt)
			if !errors.Is(err, errFailed) {
				t.Fatalf("runItem = %v, want errFailed", err)
			}
			wantIDs := []string{"work-12-backfill/0/0", fmt.Sprintf("work-12-backfill/0/1/%d/failed", tt.attempt)}
			if !slices.Equal(h.ids(), wantIDs) {
				t.Fatalf("report ids %v, want %v", h.ids(), wantIDs)
			}
			want := &commands.FailWork{FailRun: commands.FailRun{
				Meta:  commands.Meta{ID: wantIDs[1], Actor: "worker:w1", Correlation: "backfill:p1"},
				Model: "a", Version: "v2", Ranges: []interval.Range{hr(4, 5)}, RunKind: events.RunBackfill, RunID: "backfill:p1",
				Worker: "w1", ExitStatus: 3, Error: "exit status 3", StderrTail: "boom a@v2\n", Attempt: tt.attempt, Final: tt.final,
				Work: "work-12-backfill",
			}}
			if got := h.cmds[1]; !reflect.DeepEqual(got, want) {
				t.Errorf("failure report:\n got %s\nwant %s", js(t, got), js(t, want))
			}
		})
	}
}

// TestReportIDsDistinct pins that the report ids are deterministic and
// never collide: a completion id per item and batch, a failure id per item,
// batch and attempt, none equal to another, all within the id rules.
func TestReportIDsDistinct(t *testing.T) {
	completions := map[string]string{}
	failures := map[string]string{}
	// The batches of item(), by start: (0,0), (0,1), (1,0).
	starts := []string{"2024-01-01T00:00:00Z", "2024-01-01T04:00:00Z", "2024-01-01T01:00:00Z"}
	for _, id := range []string{"work-1-backfill", "work-1-scheduled", "work-11-backfill"} {
		it := item()
		_, it.RunKind, _ = events.ParseWorkID(id)
		it.ID = id
		cmds := []string{"true"}
		for _, start := range starts {
			cmds = append(cmds, fmt.Sprintf(`[ "$TIDEMARK_START" != %s ]`, start))
		}
		for attempt := 1; attempt <= 3; attempt++ {
			for ci, command := range cmds {
				h := &reports{}
				_ = worker(h, command).runItem(t.Context(), it, attempt)
				key := fmt.Sprintf("%s, attempt %d, command %d", id, attempt, ci)
				for _, c := range h.cmds {
					cid := c.Header().ID
					if c.Kind() == commands.KindCompleteWork {
						if prev, ok := completions[cid]; ok && !strings.HasPrefix(prev, id+",") {
							t.Errorf("completion id %q of %s already used by %s", cid, key, prev)
						}
						completions[cid] = key
						continue
					}
					if prev, ok := failures[cid]; ok {
						t.Errorf("failure id %q of %s already used by %s", cid, key, prev)
					}
					failures[cid] = key
				}
			}
		}
	}
	if len(completions) != 3*3 || len(failures) != 3*3*3 {
		t.Errorf("%d completion ids (want 9), %d failure ids (want 27)", len(completions), len(failures))
	}
	for id := range failures {
		if _, ok := completions[id]; ok {
			t.Errorf("id %q is both a completion and a failure", id)
		}
	}
}

// TestStderrTail pins that a failure carries at most MaxStderrTail bytes:
// the end of stderr, so the report passes validation.
func TestStderrTail(t *testing.T) {
	h := &reports{}
	w := worker(h, `i=0; while [ $i -lt 500 ]; do printf 0123456789 >&2; i=$((i+1)); done; printf END >&2; exit 1`)
	it := item()
	it.Steps = it.Steps[:1]
	if err := w.runItem(t.Context(), it, 1); !errors.Is(err, errFailed) {
		t.Fatalf("runItem = %v, want errFailed", err)
	}
	if len(h.cmds) != 1 {
		t.Fatalf("reports %v, want one failure (did the report fail validation?)", h.ids())
	}
	f := h.cmds[0].(*commands.FailWork)
	if len(f.StderrTail) != commands.MaxStderrTail || !strings.HasSuffix(f.StderrTail, "6789END") {
		t.Errorf("stderr tail: %d bytes ending %q, want %d ending 6789END", len(f.StderrTail), f.StderrTail[max(0, len(f.StderrTail)-10):], commands.MaxStderrTail)
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		writes []string
		want   string
	}{
		{"short", 8, []string{"ab", "cd"}, "abcd"},
		{"exact", 4, []string{"ab", "cd"}, "abcd"},
		{"over, across writes", 4, []string{"abc", "def", "g"}, "defg"},
		{"one long write", 3, []string{"abcdefgh"}, "fgh"},
		{"a rune cut at the start is dropped", 4, []string{"xé", "abc"}, "abc"},
		{"invalid bytes are dropped", 8, []string{"a\xffb"}, "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := &tail{n: tt.n}
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("tail = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRunItemTimeout pins that a batch over Timeout is killed and
// reported as timed out, exit status -1.
func TestRunItemTimeout(t *testing.T) {
	h := &reports{}
	w := worker(h, "sleep 60")
	w.Timeout = 100 * time.Millisecond
	it := item()
	it.Steps = it.Steps[:1]
	if err := w.runItem(t.Context(), it, 1); !errors.Is(err, errFailed) {
		t.Fatalf("runItem = %v, want errFailed", err)
	}
	if len(h.cmds) != 1 {
		t.Fatalf("reports %v, want one failure", h.ids())
	}
	f := h.cmds[0].(*commands.FailWork)
	if f.Error != "timed out after 100ms" || f.ExitStatus != -1 {
		t.Errorf("failure %q, exit %d; want timed out after 100ms, -1", f.Error, f.ExitStatus)
	}
}

// TestRunItemStopped pins that a worker stopping reports nothing: the
// item is handed back.
func TestRunItemStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h := &reports{}
	if err := worker(h, "true").runItem(ctx, item(), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("runItem = %v, want context.Canceled", err)
	}
	if len(h.cmds) != 0 {
		t.Errorf("reports %v, want none", h.ids())
	}
}

// fakeMsg is a delivered work item that records how it was settled.
type fakeMsg struct {
	data      []byte
	delivered uint64
	mu        sync.Mutex
	acts      []string
}

func (m *fakeMsg) act(s string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acts = append(m.acts, s)
	return nil
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: m.delivered}, nil
}
func (m *fakeMsg) Data() []byte                       { return m.data }
func (m *fakeMsg) Headers() nats.Header               { return nats.Header{} }
func (m *fakeMsg) Subject() string                    { return work.Subject(events.RunBackfill) }
func (m *fakeMsg) Reply() string                      { return "" }
func (m *fakeMsg) Ack() error                         { return m.act("ack") }
func (m *fakeMsg) DoubleAck(context.Context) error    { return m.act("double_ack") }
func (m *fakeMsg) Nak() error                         { return m.act("nak") }
func (m *fakeMsg) NakWithDelay(d time.Duration) error { return m.act("nak " + d.String()) }
func (m *fakeMsg) InProgress() error                  { return nil }
func (m *fakeMsg) Term() error                        { return m.act("term") }
func (m *fakeMsg) TermWithReason(string) error        { return m.act("term") }

var _ jetstream.Msg = (*fakeMsg)(nil)

// TestHandleSettles pins how an item is settled: acked when done, handed
// back after the attempt's backoff when it failed, terminated at the last
// attempt, redelivered (never terminated) when the engine could not take
// the report, and terminated at once when the engine refused the report
// for good (it would compute the batch again to be refused again).
func TestHandleSettles(t *testing.T) {
	data, err := json.Marshal(item())
	if err != nil {
		t.Fatal(err)
	}
	notNow := func(c commands.Command) error {
		return commands.Errorf(commands.CodeUnavailable, "", "engine unavailable")
	}
	notEnded := func(c commands.Command) error {
		return commands.Errorf(commands.CodeInvalid, "ranges[0]", "range has not ended")
	}
	stale := func(c commands.Command) error {
		return commands.Errorf(commands.CodeInvalid, "run_id", "plan work of p1: the environment moved past it")
	}
	tests := []struct {
		name      string
		command   string
		delivered uint64
		reject    func(commands.Command) error
		want      string
		wantErr   bool
	}{
		{"done", "true", 1, nil, "double_ack", false},
		{"failed at the first attempt", "false", 1, nil, "nak 1s", true},
		{"failed past the backoff list", "false", 2, nil, "nak 1m0s", true},
		{"failed at the last attempt", "false", 3, nil, "term", true},
		{"failed after the last attempt", "false", 7, nil, "term", true},
		{"completion not taken at the last attempt", "true", 3, notNow, "nak 1m0s", true},
		{"failure not taken at the last attempt", "false", 3, notNow, "nak 1m0s", true},
		{"completion refused for good at the first attempt", "true", 1, stale, "term", true},
		{"completion refused on a range (the deciding clock may lag)", "true", 1, notEnded, "nak 1s", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &reports{reject: tt.reject}
			w := worker(h, tt.command)
			var done []error
			w.Done = func(it work.Item, err error) {
				if it.ID != "work-12-backfill" {
					t.Errorf("Done for %q", it.ID)
				}
				done = append(done, err)
			}
			m := &fakeMsg{data: data, delivered: tt.delivered}
			w.handle(t.Context(), m)
			if !slices.Equal(m.acts, []string{tt.want}) {
				t.Errorf("settled %v, want [%s]", m.acts, tt.want)
			}
			if len(done) != 1 || (done[0] != nil) != tt.wantErr {
				t.Errorf("Done got %v, want one call (error: %v)", done, tt.wantErr)
			}
		})
	}

	t.Run("undecodable", func(t *testing.T) {
		h := &reports{}
		w := worker(h, "true")
		called := false
		w.Done = func(work.Item, error) { called = true }
		m := &fakeMsg{data: []byte("{not json"), delivered: 1}
		w.handle(t.Context(), m)
		if !slices.Equal(m.acts, []string{"term"}) || len(h.cmds) != 0 || called {
			t.Errorf("settled %v, reports %v, Done called %v; want [term], none, false", m.acts, h.ids(), called)
		}
	})

	t.Run("stopping", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		w := worker(&reports{}, "true")
		m := &fakeMsg{data: data, delivered: 3}
		w.handle(ctx, m)
		if !slices.Equal(m.acts, []string{"nak"}) {
			t.Errorf("settled %v, want [nak]", m.acts)
		}
	})
}

// TestOutputWrittenSerially: Output is any io.Writer (the integration
// tests pass a strings.Builder), so the worker must not write it from two
// goroutines at once. Run with -race.
func TestOutputWrittenSerially(t *testing.T) {
	w := worker(&reports{}, `for i in 1 2 3 4 5 6 7 8; do echo out; echo err >&2; done`)
	w.Output = &strings.Builder{}
	it := item()
	for range 10 {
		if err := w.runItem(t.Context(), it, 1); err != nil {
			t.Fatal(err)
		}
	}
}

// computeFunc is a work.Computer.
type computeFunc func(ctx context.Context, b work.Batch) error

func (f computeFunc) Compute(ctx context.Context, b work.Batch) (work.Result, error) {
	return work.Result{}, f(ctx, b)
}

// TestComputeReplacesCommand: with Compute set the worker runs no shell
// command; each batch is handed to it (item, step, range, attempt), a
// success is reported complete as a command's would be, and a *work.Failure
// is reported with its exit status and stderr tail.
func TestComputeReplacesCommand(t *testing.T) {
	h := &reports{}
	w := worker(h, "")
	var got []string
	w.Compute = computeFunc(func(_ context.Context, b work.Batch) error {
		st := b.Item.Steps[b.Step]
		got = append(got, fmt.Sprintf("%s %s %d", st.Snapshot, b.Range, b.Attempt))
		if b.Step == 1 {
			return &work.Failure{ExitStatus: 7, StderrTail: "no such table", Err: errors.New("write failed")}
		}
		return nil
	})
	err := w.runItem(t.Context(), item(), 2)
	if !errors.Is(err, errFailed) {
		t.Fatalf("runItem = %v, want errFailed", err)
	}
	want := []string{"a@v2 " + hr(0, 2).String() + " 2", "a@v2 " + hr(4, 5).String() + " 2", "b@v1+p1 " + hr(1, 3).String() + " 2"}
	if !slices.Equal(got, want) {
		t.Errorf("batches %v, want %v", got, want)
	}
	if ids := h.ids(); !slices.Equal(ids, []string{"work-12-backfill/0/0", "work-12-backfill/0/1", "work-12-backfill/1/0/2/failed"}) {
		t.Fatalf("reports %v", ids)
	}
	f := h.cmds[2].(*commands.FailWork)
	if f.ExitStatus != 7 || f.StderrTail != "no such table" || f.Error != "write failed" || f.Model != "b" {
		t.Errorf("failure report: %s", js(t, f))
	}
	// A plain error: exit status -1, no stderr.
	h2 := &reports{}
	w2 := worker(h2, "")
	w2.Compute = computeFunc(func(context.Context, work.Batch) error { return errors.New("connection refused") })
	_ = w2.runItem(t.Context(), item(), 1)
	if f := h2.cmds[0].(*commands.FailWork); f.ExitStatus != -1 || f.StderrTail != "" || f.Error != "connection refused" {
		t.Errorf("plain failure report: %s", js(t, f))
	}
}

// TestCountsItems: the counts a heartbeat carries follow the items
// handled: done, failed.
func TestCountsItems(t *testing.T) {
	data, err := json.Marshal(item())
	if err != nil {
		t.Fatal(err)
	}
	w := worker(&reports{}, "true")
	w.handle(t.Context(), &fakeMsg{data: data, delivered: 1})
	w.handle(t.Context(), &fakeMsg{data: data, delivered: 1})
	fails := worker(&reports{}, "false")
	fails.handle(t.Context(), &fakeMsg{data: data, delivered: 1})
	if d, f, n := w.Counts(); d != 2 || f != 0 || n != 0 {
		t.Errorf("succeeding worker: done %d failed %d in flight %d", d, f, n)
	}
	if d, f, n := fails.Counts(); d != 0 || f != 1 || n != 0 {
		t.Errorf("failing worker: done %d failed %d in flight %d", d, f, n)
	}
}

// TestPermanentFailureGivesUp: a batch its Computer says can never be
// computed as sent (work.ErrPermanent) is reported final and the item
// terminated at its first attempt, not retried.
func TestPermanentFailureGivesUp(t *testing.T) {
	data, err := json.Marshal(item())
	if err != nil {
		t.Fatal(err)
	}
	h := &reports{}
	w := worker(h, "")
	w.Compute = computeFunc(func(context.Context, work.Batch) error {
		return fmt.Errorf("steps[].sql.table: required: %w", work.ErrPermanent)
	})
	m := &fakeMsg{data: data, delivered: 1}
	w.handle(t.Context(), m)
	if !slices.Equal(m.acts, []string{"term"}) {
		t.Errorf("settled %v, want [term]", m.acts)
	}
	if len(h.cmds) != 1 || !h.cmds[0].(*commands.FailWork).Final {
		t.Errorf("reports %s, want one final failure", js(t, h.cmds))
	}
}

// TestCheckBeforePlanWork: before each step of a plan's item the worker
// asks the engine whether it may still compute it (check_work, the
// complete_work it would send); a step refused for good (stale plan work:
// its table is production's now) is not computed and the item is given
// up; an engine that cannot answer now hands the item back. An item of no
// plan (a scheduler tick's) asks nothing; a restatement's asks, as plan
// work does.
func TestCheckBeforePlanWork(t *testing.T) {
	it := item()
	data, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	run := func(refuse commands.Code, d []byte) (*reports, *fakeMsg, map[string]int) {
		t.Helper()
		h := &reports{reject: func(c commands.Command) error {
			if ch, ok := c.(*commands.CheckWork); ok && refuse != "" && ch.Model == "b" {
				return commands.Errorf(refuse, "run_id", "backfill work of plan p1 for b@v1+p1 would write production's table")
			}
			return nil
		}}
		w := worker(h, "")
		computed := map[string]int{}
		w.Compute = computeFunc(func(_ context.Context, b work.Batch) error {
			computed[b.Item.Steps[b.Step].Snapshot]++
			return nil
		})
		m := &fakeMsg{data: d, delivered: 1}
		w.handle(t.Context(), m)
		return h, m, computed
	}

	h, m, computed := run("", data)
	if !slices.Equal(m.acts, []string{"double_ack"}) || len(h.checks) != 2 || computed["a@v2"] != 2 || computed["b@v1+p1"] != 1 {
		t.Fatalf("current work: settled %v, %d checks, computed %v", m.acts, len(h.checks), computed)
	}
	for i, c := range h.checks {
		st := it.Steps[i]
		if c.Work != it.ID || c.Model != st.Model || c.Version != st.Version || c.RunID != st.RunID || c.RunKind != it.RunKind || !slices.Equal(c.Ranges, st.Ranges) {
			t.Errorf("check %d: %s, want step %d of %s", i, js(t, c), i, it.ID)
		}
	}

	h, m, computed = run(commands.CodeInvalid, data)
	if !slices.Equal(m.acts, []string{"term"}) || computed["b@v1+p1"] != 0 || computed["a@v2"] != 2 {
		t.Fatalf("stale step: settled %v, computed %v; want term and b@v1+p1 unwritten", m.acts, computed)
	}
	for _, c := range h.cmds {
		if c.Kind() != commands.KindCompleteWork {
			t.Errorf("stale step: reported %s", js(t, c))
		}
	}

	// A batch message refused for good is given up with a final
	// fail_work naming the item, so the publisher stops holding the
	// batches that wait for it.
	batch := it
	batch.Steps, batch.Batch = []work.Step{it.Steps[1]}, "1/0"
	batchData, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	h, m, computed = run(commands.CodeInvalid, batchData)
	if !slices.Equal(m.acts, []string{"term"}) || computed["b@v1+p1"] != 0 || len(h.cmds) != 1 {
		t.Fatalf("stale batch: settled %v, computed %v, reported %s; want term, unwritten, one report", m.acts, computed, js(t, h.cmds))
	}
	if f, ok := h.cmds[0].(*commands.FailWork); !ok || !f.Final || f.Work != it.ID || f.Model != "b" || !strings.Contains(f.Error, "given up") {
		t.Errorf("stale batch: reported %s, want a final fail_work of b naming %s", js(t, h.cmds[0]), it.ID)
	}

	_, m, computed = run(commands.CodeConflict, data)
	if !slices.Equal(m.acts, []string{"nak 1s"}) || computed["b@v1+p1"] != 0 {
		t.Fatalf("state changing: settled %v, computed %v; want the item handed back, b@v1+p1 unwritten", m.acts, computed)
	}

	// An engine that cannot answer (down, older, or check_work not
	// granted) is not waited for: computed as before check_work.
	_, m, computed = run(commands.CodeUnavailable, data)
	if !slices.Equal(m.acts, []string{"double_ack"}) || computed["b@v1+p1"] != 1 {
		t.Fatalf("engine unavailable: settled %v, computed %v; want the step computed unchecked", m.acts, computed)
	}

	tick := it
	tick.ID, tick.RunKind, tick.Plan = "work-13-scheduled", events.RunScheduled, ""
	if data, err = json.Marshal(tick); err != nil {
		t.Fatal(err)
	}
	if h, m, _ := run(commands.CodeInvalid, data); len(h.checks) != 0 || !slices.Equal(m.acts, []string{"double_ack"}) {
		t.Fatalf("scheduled item: %d checks, settled %v", len(h.checks), m.acts)
	}

	// A restatement's item has no plan but is fenced by the generation it
	// read: the worker asks, and a step refused for good (the environment
	// moved on: stale_generation) is not computed.
	restate := it
	restate.ID, restate.RunKind, restate.Plan = "work-14-restate", events.RunRestate, ""
	if data, err = json.Marshal(restate); err != nil {
		t.Fatal(err)
	}
	h, m, computed = run(commands.CodeStaleGeneration, data)
	if len(h.checks) != 2 || !slices.Equal(m.acts, []string{"term"}) || computed["b@v1+p1"] != 0 {
		t.Fatalf("stale restate item: %d checks, settled %v, computed %v", len(h.checks), m.acts, computed)
	}
}

// TestCheckInChunks: a step with more ranges than one command may carry
// is asked about in chunks of commands.MaxRanges.
func TestCheckInChunks(t *testing.T) {
	it := item()
	it.Steps = it.Steps[:1]
	it.Steps[0].Ranges = nil
	for i := 0; i <= commands.MaxRanges; i++ {
		it.Steps[0].Ranges = append(it.Steps[0].Ranges, interval.Range{Start: t0.Add(time.Duration(2*i) * time.Hour), End: t0.Add(time.Duration(2*i+1) * time.Hour)})
	}
	data, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	h := &reports{}
	w := worker(h, "")
	w.Compute = computeFunc(func(context.Context, work.Batch) error { return nil })
	m := &fakeMsg{data: data, delivered: 1}
	w.handle(t.Context(), m)
	if !slices.Equal(m.acts, []string{"double_ack"}) || len(h.checks) != 2 || len(h.checks[0].Ranges) != commands.MaxRanges || len(h.checks[1].Ranges) != 1 {
		t.Fatalf("settled %v, %d checks", m.acts, len(h.checks))
	}
}
