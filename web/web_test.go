package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/scenario"
)

func quiet() *slog.Logger { return jstest.Quiet() }

// served plays a scenario into a data dir and serves the reopened engine,
// its clock at 11:30.
func served(t *testing.T, file string) (*engine.Engine, *httptest.Server) {
	t.Helper()
	return servedAt(t, file, time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC), false)
}

// servedAt is served on a clock at at, with a roster of no worker when
// roster is set.
func servedAt(t *testing.T, file string, at time.Time, roster bool) (*engine.Engine, *httptest.Server) {
	t.Helper()
	f, err := scenario.Load("../testdata/scenarios/" + file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := scenario.Run(t.Context(), f, scenario.Options{DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	e := jstest.Engine(t, engine.Config{Clock: func() time.Time { return at }, TrustCommandTime: true},
		jstest.Node(t, natsnode.Config{DataDir: dir}))
	s := &Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet(), MinInterval: time.Millisecond}
	if roster {
		s.Workers = func() []Worker { return nil }
	}
	h, err := s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return e, srv
}

// commanded is an engine on a simulated clock and handle, which sends it
// a command (failing the test on a rejection), and meta, a command's
// header at at.
func commanded(t *testing.T) (e *engine.Engine, handle func(commands.Command) commands.Reply, meta func(at time.Time) commands.Meta) {
	e = jstest.Engine(t, engine.Config{TrustCommandTime: true})
	handle = func(c commands.Command) commands.Reply {
		t.Helper()
		r := e.Handle(t.Context(), c)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	return e, handle, func(at time.Time) commands.Meta { return commands.Meta{ID: commands.NewID(), At: at} }
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDashboardMetricsHealth(t *testing.T) {
	_, srv := served(t, "stale-scheduler-after-promotion.yaml")
	code, page := get(t, srv.URL+"/")
	for _, want := range []string{`data-plan="p1" data-outcome="accepted"`, "trailing_gap_accepted", `data-snapshot="events@v2"`,
		`class="repaired"`, `class="frontier"`, "misses the trailing suffix 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z"} {
		if code != 200 || !strings.Contains(page, want) {
			t.Fatalf("dashboard (%d) lacks %q:\n%s", code, want, page)
		}
	}
	code, metrics := get(t, srv.URL+"/metrics")
	for _, want := range []string{`tidemark_decisions_total{code="trailing_gap_accepted"} 1`, `tidemark_decision_outcomes_total{outcome="accepted"} 2`,
		"tidemark_repair_debts_open 0", `tidemark_worker_runs_total{run_kind="scheduled"}`, `tidemark_model_freshness_seconds{env="prod",model="events"} 0`, "tidemark_projection_lag_events 0", "tidemark_append_seconds_bucket"} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 200 || !strings.HasPrefix(body, "ready") {
		t.Fatalf("readyz: %d %s", code, body)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
}

// Lateness is how far an incumbent's frontier is behind its readiness
// frontier now: events@v2 covers up to 07:00 while the hourly schedule
// made up to 11:00 ready at 11:30 (4 h late, 4.5 h since its frontier);
// a model that is not behind shows 0.
func TestModelLatenessMetric(t *testing.T) {
	_, behind := served(t, "incumbent-without-coverage.yaml")
	_, late := get(t, behind.URL+"/metrics")
	_, ahead := served(t, "stale-scheduler-after-promotion.yaml")
	_, onTime := get(t, ahead.URL+"/metrics")
	for _, c := range []struct{ metrics, want string }{
		{late, `tidemark_model_lateness_seconds{env="prod",model="events"} 14400`},
		{late, `tidemark_model_freshness_seconds{env="prod",model="events"} 16200`},
		{onTime, `tidemark_model_lateness_seconds{env="prod",model="events"} 0`},
	} {
		if !strings.Contains(c.metrics, c.want+"\n") {
			t.Fatalf("metrics lack %q:\n%s", c.want, c.metrics)
		}
	}
}

// The live stream sends the content at once and again after a change.
func TestLiveUpdates(t *testing.T) {
	e, srv := served(t, "trailing-gap.yaml")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/live", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	next := func() (id string, data string) {
		var b strings.Builder
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the event stream: %v", err)
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				b.WriteString(strings.TrimPrefix(line, "data: ") + "\n")
			case line == "" && b.Len() > 0:
				return id, b.String()
			}
		}
	}
	id, data := next()
	if !strings.Contains(data, `data-outcome="accepted"`) || strings.Contains(data, `data-env="qa"`) {
		t.Fatalf("first update (id %s):\n%s", id, data)
	}
	r := e.Handle(ctx, &commands.RegisterSnapshot{Meta: commands.Meta{ID: "r1", At: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)},
		Model: "clicks", Version: "v1", Cron: "@hourly", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	id2, _ := next()
	if id2 == id || id2 != strconv.FormatUint(r.Seq, 10) {
		t.Fatalf("second update id %s after seq %d (first %s)", id2, r.Seq, id)
	}
}

// With a warehouse, the dashboard shows each model's rows and newest row
// next to its coverage, asking the warehouse at most once per RowsEvery.
func TestDashboardRows(t *testing.T) {
	e, _ := served(t, "stale-scheduler-after-promotion.yaml")
	newest := time.Date(2026, 12, 1, 10, 59, 0, 0, time.UTC)
	asked := 0
	s := &Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet(), RowsEvery: time.Hour,
		Rows: func(_ context.Context, snapshot string) (int64, time.Time, bool) {
			asked++
			return 660, newest, snapshot == "events@v2"
		},
		Written: func(_ context.Context, snapshot string) (time.Time, time.Time, bool) {
			return newest.Add(time.Minute), newest.Add(3 * time.Minute), snapshot == "events@v2"
		}}
	h, err := s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 2 {
		_, page := get(t, srv.URL+"/")
		if !strings.Contains(page, `<td class="rows">660</td><td><time datetime="2026-12-01T10:59:00Z" title="2026-12-01T10:59:00Z">12-01 10:59</time></td><td class="written">to <time datetime="2026-12-01T11:00:00Z" title="2026-12-01T11:00:00Z">12-01 11:00</time> at <time datetime="2026-12-01T11:02:00Z" title="2026-12-01T11:02:00Z">12-01 11:02</time></td>`) {
			t.Fatalf("the page lacks the rows of events@v2:\n%s", page)
		}
	}
	if asked != 1 {
		t.Fatalf("the warehouse was asked %d times for one snapshot within RowsEvery", asked)
	}
}

// A plan built and not promoted yet is in flight, with the share of its
// backfill done and, per model, its work's batches, intervals and rows
// done, the pace and the ETA.
func TestDashboardPlansInFlight(t *testing.T) {
	e, handle, metaAt := commanded(t)
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	meta := func() commands.Meta { return metaAt(at) }
	handle(&commands.RegisterSnapshot{Meta: meta(), Model: "events", Version: "v1", Cron: "@hourly", Start: at.Add(-4 * time.Hour)})
	built := handle(&commands.BuildPlan{Meta: meta(), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1"}})
	// The first of four hours (one batch: no SQL), 120 rows, 10s after
	// the plan was built: 12 rows/s, 0.1 intervals/s, three left: 30s.
	handle(&commands.CompleteIntervals{Meta: commands.Meta{ID: commands.NewID(), At: at.Add(10 * time.Second)}, Model: "events", Version: "v1",
		Ranges: []interval.Range{interval.R(at.Add(-4*time.Hour), at.Add(-3*time.Hour))}, Work: events.WorkID(built.Seq, events.RunBackfill), Rows: 120})
	h, err := (&Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet()}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(page, `<li data-inflight="p1">p1 → prod <progress max="100" value="25">25%</progress> backfill 25% (1h0m0s of 4h0m0s)`) {
		t.Fatalf("p1 is not shown in flight at 25%%:\n%s", page)
	}
	if !strings.Contains(page, `<tr data-work="events@v1" data-run-kind="backfill"><td class="snap">events@v1</td><td>backfill</td><td class="batches"><progress max="1" value="0"></progress> 0/1</td><td>1/4</td><td class="rows">120</td><td class="rate">12.0 rows/s · 0.10 intervals/s</td><td class="eta">30s</td></tr>`) {
		t.Fatalf("p1's work is not shown per model:\n%s", page)
	}
	_, metrics := get(t, srv.URL+"/metrics")
	if !strings.Contains(metrics, `tidemark_plan_backfill_progress_ratio{env="prod",plan="p1"} 0.25`) {
		t.Fatalf("metrics lack p1's progress:\n%s", metrics)
	}
}

// A restatement whose work is not done is on the dashboard with its
// work per model, and leaves it once its tables cover it again.
func TestDashboardRestatementsInFlight(t *testing.T) {
	e := jstest.Engine(t, engine.Config{TrustCommandTime: true})
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	meta := func() commands.Meta { return commands.Meta{ID: commands.NewID(), At: at} }
	handle := func(c commands.Command) commands.Reply {
		t.Helper()
		r := e.Handle(t.Context(), c)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	start := at.Add(-4 * time.Hour)
	handle(&commands.RegisterSnapshot{Meta: meta(), Model: "events", Version: "v1", Cron: "@hourly", Start: start})
	handle(&commands.BuildPlan{Meta: meta(), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1"}})
	handle(&commands.CompleteIntervals{Meta: meta(), Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(start, at)}})
	handle(&commands.Promote{Meta: meta(), Plan: "p1"})
	hour := interval.R(start.Add(time.Hour), start.Add(2*time.Hour))
	r := handle(&commands.Restate{Meta: meta(), Env: "prod", Model: "events", Ranges: []interval.Range{hour}})
	h, err := (&Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet()}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, page := get(t, srv.URL+"/")
	want := `<li data-restating="` + r.Restatement.Run + `">events@v1 ` + hour.String() + ` in prod`
	if !strings.Contains(page, want) || !strings.Contains(page, `<tr data-work="events@v1" data-run-kind="restate">`) {
		t.Fatalf("the restatement is not shown in flight (%s):\n%s", want, page)
	}
	handle(&commands.CompleteIntervals{Meta: meta(), Model: "events", Version: "v1", Ranges: []interval.Range{hour}})
	if _, page := get(t, srv.URL+"/"); strings.Contains(page, "data-restating") {
		t.Fatalf("a restatement covered again is still shown:\n%s", page)
	}
}

// TestWorkersPanelAndMetrics: the live workers Workers lists are on the
// dashboard (name, kind, counts, last seen) and in /metrics; a worker no
// longer listed leaves both; without Workers there is no panel and no
// worker gauge.
func TestWorkersPanelAndMetrics(t *testing.T) {
	e := jstest.Engine(t, engine.Config{})
	var mu sync.Mutex
	live := []Worker{
		{Name: "w1", User: "worker", Kind: "sql", Done: 4, Failed: 1, InFlight: 2, Age: 1500 * time.Millisecond},
		{Name: "builtin-h-1", Kind: "builtin", Done: 7},
	}
	ws := &Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Logger: quiet(), WorkersEvery: 10 * time.Millisecond,
		Workers: func() []Worker { mu.Lock(); defer mu.Unlock(); return slices.Clone(live) }}
	h, err := ws.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, page := get(t, srv.URL+"/")
	for _, want := range []string{`<h2>Workers</h2>`, `<tr data-worker="w1" data-user="worker"><td>w1</td><td>worker</td><td>sql</td><td>4</td><td>1</td><td>2</td><td>1.5s ago</td></tr>`, `<tr data-worker="builtin-h-1" data-user=""><td>builtin-h-1</td><td>(engine)</td>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("dashboard lacks %q:\n%s", want, page)
		}
	}
	_, metrics := get(t, srv.URL+"/metrics")
	for _, want := range []string{"tidemark_workers_live 2\n", `tidemark_worker_last_seen_seconds{kind="sql",user="worker",worker="w1"} 1.5`,
		`tidemark_worker_items_total{kind="sql",outcome="done",user="worker",worker="w1"} 4`, `tidemark_worker_items_total{kind="sql",outcome="failed",user="worker",worker="w1"} 1`,
		`tidemark_worker_in_flight{kind="sql",user="worker",worker="w1"} 2`, `tidemark_worker_items_total{kind="builtin",outcome="done",user="",worker="builtin-h-1"} 7`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
	// A live page follows the roster while the stream is quiet.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/live", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	update := func() string {
		var b strings.Builder
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the event stream: %v", err)
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				b.WriteString(d)
			} else if line == "\n" && b.Len() > 0 {
				return b.String()
			}
		}
	}
	if u := update(); !strings.Contains(u, `data-worker="w1"`) {
		t.Fatalf("first live update lacks w1:\n%s", u)
	}
	mu.Lock()
	live = live[1:]
	mu.Unlock()
	for u := update(); strings.Contains(u, `data-worker="w1"`); u = update() {
	}
	_, page = get(t, srv.URL+"/")
	_, metrics = get(t, srv.URL+"/metrics")
	if strings.Contains(page, `data-worker="w1"`) || strings.Contains(metrics, `worker="w1"`) || !strings.Contains(metrics, "tidemark_workers_live 1\n") {
		t.Fatalf("w1 gone but still shown:\n%s\n%s", page, metrics)
	}
	mu.Lock()
	live = nil
	mu.Unlock()
	if _, page = get(t, srv.URL+"/"); !strings.Contains(page, "No live worker.") {
		t.Fatalf("no worker: %s", page)
	}

	// A server without a roster shows no panel and no worker gauge.
	e2 := jstest.Engine(t, engine.Config{})
	h2, err := (&Server{Proj: e2.Projection(), Log: e2.Log().Reader(), Registry: e2.Registry(), Logger: quiet()}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(h2)
	defer srv2.Close()
	if _, page := get(t, srv2.URL+"/"); strings.Contains(page, "Workers") {
		t.Fatalf("a panel without a roster:\n%s", page)
	}
	if _, metrics := get(t, srv2.URL+"/metrics"); strings.Contains(metrics, "tidemark_workers_live") {
		t.Fatal("a worker gauge without a roster")
	}
}

// Every decision has a page, read from the log at its sequence: a
// superseded decision of a re-promoted plan too, linking to the latest.
func TestDecisionPage(t *testing.T) {
	_, srv := served(t, "repromote-new-id.yaml")
	_, page := get(t, srv.URL+"/")
	links := regexp.MustCompile(`href="/decisions/(\d+)"`).FindAllStringSubmatch(page, -1)
	var seqs []uint64
	for _, l := range links {
		n, _ := strconv.ParseUint(l[1], 10, 64)
		seqs = append(seqs, n)
	}
	// Three decisions: the deploy's, p1's acceptance, p1's conflicting retry.
	if len(seqs) != 3 {
		t.Fatalf("dashboard links %d decisions, want 3:\n%s", len(seqs), page)
	}
	slices.Sort(seqs)
	latest, first := seqs[2], seqs[1]
	code, body := get(t, srv.URL+"/decisions/"+strconv.FormatUint(latest, 10))
	for _, want := range []string{`data-outcome="rejected"`, `data-code="conflicting_plan"`, "p1 → prod", `events@v2`, "incumbent frontier"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("latest decision page (%d) lacks %q:\n%s", code, want, body)
		}
	}
	if strings.Contains(body, "decided again since") {
		t.Fatalf("the latest decision is marked superseded:\n%s", body)
	}
	code, body = get(t, srv.URL+"/decisions/"+strconv.FormatUint(first, 10))
	for _, want := range []string{`data-outcome="accepted"`, `data-code="no_gaps"`, `href="/decisions/` + strconv.FormatUint(latest, 10) + `"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("superseded decision page (%d) lacks %q:\n%s", code, want, body)
		}
	}
	for path, want := range map[string]int{"/decisions/1": 404, "/decisions/999999": 404, "/decisions/x": 400, "/decisions/0": 400} {
		if code, body := get(t, srv.URL+path); code != want {
			t.Fatalf("%s: %d, want %d: %s", path, code, want, body)
		}
	}
}

// The dashboard lists the tables the janitor retired.
func TestDashboardRetiredTables(t *testing.T) {
	e, srv := served(t, "stale-scheduler-after-promotion.yaml")
	if _, page := get(t, srv.URL+"/"); strings.Contains(page, "Retired tables") {
		t.Fatalf("retired tables listed before any retirement:\n%s", page)
	}
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	r := e.Handle(t.Context(), &commands.RetireTables{Meta: commands.Meta{ID: commands.NewID(), At: at}, Tables: []string{"events@v1"}, GraceMS: time.Hour.Milliseconds(), RetainMS: time.Hour.Milliseconds()})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.Projection().WaitFor(t.Context(), r.Seq); err != nil {
		t.Fatal(err)
	}
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(page, `data-retired="events@v1"`) || !strings.Contains(page, "written by events@v1") {
		t.Fatalf("dashboard lacks the retired table:\n%s", page)
	}
}

// The dashboard says how each env's generation began, and marks a
// rollback.
func TestDashboardRollback(t *testing.T) {
	e, srv := served(t, "stale-scheduler-after-promotion.yaml")
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(page, "since plan ") || strings.Contains(page, "data-rolled-back-to") {
		t.Fatalf("before the rollback, the dashboard lacks the accepted plan or shows a rollback:\n%s", page)
	}
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	r := e.Handle(t.Context(), &commands.Rollback{Meta: commands.Meta{ID: commands.NewID(), At: at}, Env: "prod"})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.Projection().WaitFor(t.Context(), r.Seq); err != nil {
		t.Fatal(err)
	}
	_, page = get(t, srv.URL+"/")
	want := fmt.Sprintf(`data-rolled-back-to="%d">rolled back from generation %d to generation %d&#39;s incumbents at seq %d`, r.Rollback.ToGeneration, r.Rollback.FromGeneration, r.Rollback.ToGeneration, r.Seq)
	if !strings.Contains(page, want) {
		t.Fatalf("dashboard lacks %q:\n%s", want, page)
	}
}

// sseEvent is one event as an EventSource dispatches it.
type sseEvent struct {
	Type, ID, Data string
	// Fields are the names of every field the event's lines set.
	Fields []string
}

// readSSE parses an event stream as the SSE spec's EventSource does:
// lines end at CR LF, CR or LF; "field: value" (one leading space
// dropped); data lines are joined with LF; an empty line dispatches.
func readSSE(t *testing.T, rd *bufio.Reader) sseEvent {
	t.Helper()
	var ev sseEvent
	var data []string
	var line []byte
	for {
		c, err := rd.ReadByte()
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		if c != '\r' && c != '\n' {
			line = append(line, c)
			continue
		}
		if c == '\r' {
			if next, err := rd.Peek(1); err == nil && next[0] == '\n' {
				_, _ = rd.ReadByte()
			}
		}
		l := string(line)
		line = line[:0]
		if l == "" {
			if data == nil {
				ev = sseEvent{}
				continue
			}
			ev.Data = strings.Join(data, "\n")
			if ev.Type == "" {
				ev.Type = "message"
			}
			return ev
		}
		if strings.HasPrefix(l, ":") {
			continue
		}
		name, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		ev.Fields = append(ev.Fields, name)
		switch name {
		case "event":
			ev.Type = value
		case "id":
			ev.ID = value
		case "data":
			data = append(data, value)
		}
	}
}

// TestUserStringsEscaped: worker names (any user-chosen string) holding
// CR, LF, CR LF or other control characters cannot start a field or an
// event of the live stream: every event is one whole "update" of the
// content, with the server's id. The page escapes markup, and /metrics
// keeps two users' workers of one name apart.
func TestUserStringsEscaped(t *testing.T) {
	e := jstest.Engine(t, engine.Config{})
	hostile := []Worker{
		{Name: "cr\revent: evil\rdata: INJECTED-CR\r\rid: 666\r", User: "mallory", Kind: "exec"},
		{Name: "lf\nevent: evil\ndata: INJECTED-LF\n\n", User: "mallory", Kind: "exec"},
		{Name: "crlf\r\nevent: evil\r\ndata: INJECTED-CRLF\r\n\r\n", User: "mallory", Kind: "exec\r\n\r\n"},
		{Name: "nul\x00\x01\x1b[31m", User: "mallory", Kind: "exec"},
		{Name: "nul\x02\x03\x1b[31m", User: "mallory", Kind: "exec"},
		{Name: "<script>alert(1)</script>", User: "mallory", Kind: "exec"},
		{Name: "w1", User: "mallory", Kind: "exec"},
		{Name: "w1", User: "worker", Kind: "sql"},
	}
	ws := &Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Logger: quiet(), WorkersEvery: 10 * time.Millisecond,
		Workers: func() []Worker { return slices.Clone(hostile) }}
	h, err := ws.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/live", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	seq := strconv.FormatUint(e.Projection().Seq(), 10)
	for i := range 3 {
		ev := readSSE(t, rd)
		for _, f := range ev.Fields {
			if f != "event" && f != "id" && f != "data" {
				t.Fatalf("event %d sets the field %q", i, f)
			}
		}
		if ev.Type != "update" || ev.ID != seq || !strings.HasPrefix(strings.TrimSpace(ev.Data), `<p class="meta"`) ||
			!strings.Contains(ev.Data, `<p class="legend">`) || strings.Count(ev.Data, "<tr data-worker=") != len(hostile) {
			t.Fatalf("event %d is not one whole update (type %q, id %q):\n%s", i, ev.Type, ev.ID, ev.Data)
		}
		if strings.ContainsAny(ev.Data, "\r\x00\x01\x1b") {
			t.Fatalf("event %d carries a control character: %q", i, ev.Data)
		}
	}
	cancel()

	_, page := get(t, srv.URL+"/")
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("the page does not escape a worker's name")
	}
	code, metrics := get(t, srv.URL+"/metrics")
	if code != 200 || !strings.Contains(metrics, `tidemark_worker_in_flight{kind="exec",user="mallory",worker="w1"} 0`) ||
		!strings.Contains(metrics, `tidemark_worker_in_flight{kind="sql",user="worker",worker="w1"} 0`) {
		t.Fatalf("metrics (%d):\n%s", code, metrics)
	}
	if strings.Contains(metrics, "\r") || strings.Contains(metrics, "INJECTED-LF\n") {
		t.Fatalf("a label value broke a metrics line:\n%s", metrics)
	}
}
