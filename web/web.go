// Package web serves tidemark's HTTP side: the live dashboard (server-
// rendered HTML, updated over Server-Sent Events fed by the projection),
// Prometheus metrics, and health and readiness probes. It reads a
// *live.Projection (through views) and an *eventlog.Reader, never the
// engine. Importers: server (serve's dashboard), cmd/tidemark (its Build).
package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

//go:embed assets
var assets embed.FS

//go:embed templates/*.html
var templates embed.FS

// Server is the HTTP handler set. It reads; it holds no writer.
type Server struct {
	// Proj is the live projection the pages show.
	Proj *live.Projection
	// Log is the event log's reader (readiness: the stream's last
	// sequence).
	Log *eventlog.Reader
	// Registry is served on /metrics.
	Registry prometheus.Gatherer
	// Build, when its Version is set, is shown as tidemark_build_info.
	Build Build
	// Writer, when set, reports this member's name in the writer lease
	// and whether it is the writer now (tidemark_writer).
	Writer func() (member string, writing bool)
	// Clock is the engine's clock (the pages' now). Default time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
	// MinInterval spaces live updates (default 250ms).
	MinInterval time.Duration
	// Rows, when set, reports what the warehouse holds of a snapshot:
	// its rows and the newest row's time (ok false: not an SQL model).
	// The dashboard shows them next to coverage, each asked at most
	// every RowsEvery (default 5s).
	Rows      func(ctx context.Context, snapshot string) (rows int64, newest time.Time, ok bool)
	RowsEvery time.Duration
	// Written, when set (with Rows), reports the interval the warehouse
	// wrote last into a snapshot's table: its end and when it committed
	// (ok false: none recorded). Shown and cached with the rows.
	Written func(ctx context.Context, snapshot string) (end, at time.Time, ok bool)
	// Workers, when set, lists the live workers (their heartbeats): the
	// dashboard's Workers panel and the tidemark_worker* series.
	Workers func() []Worker
	// WorkersEvery is how often a live page is refreshed for the Workers
	// panel while no event arrives (default 2s).
	WorkersEvery time.Duration
	// Diff, when set, compares a plan's candidates' rows with their
	// incumbents' (`tidemark diff`) for the plan page (/plans/{id}),
	// within its context's deadline (DiffTimeout, default 10s).
	Diff        func(ctx context.Context, plan string) ([]PlanDiff, error)
	DiffTimeout time.Duration
	// diffs holds one token: plan pages compute one diff at a time (each
	// reads two whole tables' ranges), the others wait within their
	// deadline.
	diffs chan struct{}
	// views holds one token: decision pages fold the log to a view one
	// at a time, the others wait within their deadline.
	views chan struct{}
	tmpl  *template.Template

	decidedMu sync.Mutex
	decided   map[uint64]decisionPage // by seq, what the log holds (decisionAt)

	rowsMu    sync.Mutex
	rowsCache map[string]rowsEntry
}

// Worker is a live worker as the dashboard shows it.
type Worker struct {
	Name, Kind string
	// User is the authenticated user whose heartbeat subject it beats on
	// ("": the engine's own, its built-in worker); a name is one user's.
	User string
	// Done and Failed count the items it finished and failed; InFlight is
	// how many it computes now.
	Done, Failed uint64
	InFlight     int64
	Started      time.Time
	// LastSeen is when its last heartbeat arrived; Age is how long ago.
	LastSeen time.Time
	Age      time.Duration
}

func (s *Server) workersEvery() time.Duration {
	if s.WorkersEvery > 0 {
		return s.WorkersEvery
	}
	return 2 * time.Second
}

type rowsEntry struct {
	rows   int64
	newest time.Time
	ok     bool
	at     time.Time
	// The last write: its interval's end, when it committed.
	wEnd, wAt time.Time
	wOK       bool
}

// rows is Rows of snapshot, cached for RowsEvery.
func (s *Server) rows(snapshot string) rowsEntry {
	every := s.RowsEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	now := time.Now()
	s.rowsMu.Lock()
	e, hit := s.rowsCache[snapshot]
	s.rowsMu.Unlock()
	if hit && now.Sub(e.at) < every {
		return e
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.rows, e.newest, e.ok = s.Rows(ctx, snapshot)
	if s.Written != nil {
		e.wEnd, e.wAt, e.wOK = s.Written(ctx, snapshot)
	}
	e.at = now
	s.rowsMu.Lock()
	if s.rowsCache == nil {
		s.rowsCache = map[string]rowsEntry{}
	}
	s.rowsCache[snapshot] = e
	s.rowsMu.Unlock()
	return e
}

// Handler returns the routes: / (dashboard), /live (SSE), /fragment,
// /decisions/{seq} (one decision's page), /plans/{id} (one plan's page,
// with its diff), /metrics, /healthz, /readyz, /assets/.
func (s *Server) Handler() (http.Handler, error) {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Clock == nil {
		s.Clock = time.Now
	}
	if s.MinInterval == 0 {
		s.MinInterval = 250 * time.Millisecond
	}
	if err := s.registerState(); err != nil {
		return nil, err
	}
	t, err := template.New("").Funcs(template.FuncMap{"join": strings.Join, "stamp": stamp, "upper": strings.ToUpper, "ranges": ranges}).ParseFS(templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	s.tmpl = t
	s.diffs = make(chan struct{}, 1)
	s.views = make(chan struct{}, 1)
	s.decided = map[uint64]decisionPage{}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /fragment", s.fragment)
	mux.HandleFunc("GET /live", s.live)
	mux.HandleFunc("GET /decisions/{seq}", s.decision)
	mux.HandleFunc("GET /plans/{id}", s.plan)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	return mux, nil
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	last, err := s.Log.LastSeq(ctx)
	applied := s.Proj.Seq()
	switch {
	case err != nil:
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
	case applied < last:
		http.Error(w, fmt.Sprintf("not ready: projections at seq %d of %d", applied, last), http.StatusServiceUnavailable)
	default:
		fmt.Fprintf(w, "ready: projections at seq %d\n", applied)
	}
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	win, err := windowOf(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "page.html", s.view(win)); err != nil {
		s.Logger.Error("dashboard", "err", err)
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) fragment(w http.ResponseWriter, r *http.Request) {
	win, err := windowOf(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, err := s.render(win)
	if err != nil {
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b)
}

func (s *Server) render(win string) ([]byte, error) {
	var buf bytes.Buffer
	err := s.tmpl.ExecuteTemplate(&buf, "content", s.view(win))
	return buf.Bytes(), err
}

// live streams the rendered dashboard content as Server-Sent Events, once
// on connect and again after every change of the projection (at most one
// update per MinInterval).
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	win, err := windowOf(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ctx := r.Context()
	var last uint64
	first := true
	for {
		seq := s.Proj.Seq()
		if first || seq != last {
			b, err := s.render(win)
			if err != nil {
				return
			}
			writeEvent(w, "update", strconv.FormatUint(seq, 10), b)
			fl.Flush()
			first, last = false, seq
		}
		// The Workers panel changes with heartbeats, not events: with a
		// roster the page is sent again every WorkersEvery even when the
		// stream is quiet.
		idle := 15 * time.Second
		if s.Workers != nil {
			idle = s.workersEvery()
		}
		wait, cancel := context.WithTimeout(ctx, idle)
		err := s.Proj.Await(wait, func(st *projections.State) bool { return st.Seq != last })
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if s.Workers != nil {
				first = true
				continue
			}
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
			continue
		}
		t := time.NewTimer(s.MinInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// writeEvent writes one Server-Sent Event: its type, its id, and data as
// one data field per line. The stream's fields end at CR, LF or CR LF
// (the SSE spec), so every one of them in data (a user-chosen string
// holds any: a worker's name, an error's text) ends a data line, never a
// field or the event: the client joins the lines back with LF. Other
// control characters but tab are replaced by U+FFFD. event and id are
// the server's own.
func writeEvent(w io.Writer, event, id string, data []byte) {
	var b bytes.Buffer
	b.Grow(len(data) + len(data)/32 + 64)
	b.WriteString("event: " + event + "\nid: " + id + "\ndata: ")
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i++
			fallthrough
		case c == '\r' || c == '\n':
			b.WriteString("\ndata: ")
		case c < 0x20 && c != '\t' || c == 0x7f:
			b.WriteString("\uFFFD")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("\n\n")
	_, _ = w.Write(b.Bytes())
}

// ranges writes a range list for people ("-" when empty).
func ranges(rs []interval.Range) string {
	if len(rs) == 0 {
		return "-"
	}
	return strings.Join(interval.Set(rs).Strings(), ", ")
}

// failureText is a failed run for people: "backfill attempt 5, given
// up: <error>".
func failureText(f commands.RunFailure) string {
	state := "retrying"
	if f.Final {
		state = "given up"
	}
	return fmt.Sprintf("%s attempt %d, %s: %s", f.RunKind, f.Attempt, state, f.Error)
}

// stamp is a time for the pages, compact and on one line: "12-01 15:04"
// (UTC) in a <time> element whose title and datetime hold it in full;
// "-" for the zero time.
func stamp(t time.Time) template.HTML {
	if t.IsZero() {
		return "-"
	}
	full := t.UTC().Format(time.RFC3339)
	return template.HTML(`<time datetime="` + full + `" title="` + full + `">` + t.UTC().Format("01-02 15:04") + `</time>`)
}

// view is what the templates render.
type view struct {
	Seq uint64
	Lag uint64
	Now time.Time
	// Axis is the time range every coverage bar spans (?window=).
	Axis      axis
	Envs      []envView
	Repairs   []repairView
	Decisions []decisionView
	InFlight  []flightView
	// Restating are the restatements in flight (views.Restating).
	Restating []restateView
	// Workers is nil when the server has no roster (Workers unset).
	Workers []workerView
	Roster  bool
	// Retired are the snapshot tables the janitor retired, by table.
	Retired []commands.RetiredTable
}

type workerView struct {
	Worker
	Seen string // e.g. "2s ago"
}

// restateView is a restatement in flight and its work per model.
type restateView struct {
	Run, Env, Snapshot, Ranges string
	Seq                        uint64
	Models                     []workView
}

// flightView is a plan in flight and how much of its backfill is done.
type flightView struct {
	Plan, Env string
	Percent   int
	Done      string // e.g. "6h of 48h"
	Cancelled bool
	// Failures are the latest failures of the plan's work, per model.
	Failures []failureView
	// Models is the progress of the plan's work per model.
	Models []workView
	// Audits are the candidates' failed audits within the window their
	// promotion judges now.
	Audits []auditView
}

// auditView is a failed audit as the page shows it: blocking ones reject
// a promotion.
type auditView struct {
	Snapshot, Audit string
	Blocking        bool
	Text            string
}

func newAuditView(a commands.AuditStatus) auditView {
	kind := "non-blocking: warns"
	if a.Blocking {
		kind = "blocking: rejects a promotion"
	}
	result := fmt.Sprintf("%d violating rows", a.Count)
	if a.Error != "" {
		result = "could not run: " + a.Error
	}
	return auditView{Snapshot: a.Snapshot, Audit: a.Audit, Blocking: a.Blocking,
		Text: fmt.Sprintf("%s: audit %s (%s) failed on %s, %s", a.Snapshot, a.Audit, kind, interval.Set(a.Ranges), result)}
}

// workView is one model's step of a plan's work as the page shows it:
// batches and intervals done of those asked, rows written, the pace and
// the ETA ("-" before anything is done).
type workView struct {
	commands.ModelProgress
	Rate, ETA string
}

// newWorkView is m for the page: "5.0 rows/s · 0.10 intervals/s" and
// "20s" (to the second; "0s" once done).
func newWorkView(m commands.ModelProgress) workView {
	v := workView{ModelProgress: m, Rate: "-", ETA: "-"}
	if !m.LastDoneAt.IsZero() {
		v.Rate = perSecond(m.RowsPerSecond) + " rows/s · " + perSecond(m.IntervalsPerSecond) + " intervals/s"
	}
	if d, ok := m.ETA(); ok {
		v.ETA = d.Round(time.Second).String()
	}
	return v
}

// perSecond is a rate with the digits that matter: "1234", "12.5", "0.10".
func perSecond(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// failureView is a failed run as the page shows it: who, and the
// error's text (escaped by html/template like every string).
type failureView struct {
	Model string
	Final bool
	Text  string
}

type envView struct {
	Name       string
	Generation uint64
	// Since says how the generation began: the accepted plan, or the
	// rollback and the generation it restored ("" before any).
	Since string
	// RolledBackTo is the generation a rollback restored (0: the
	// generation began with a promotion).
	RolledBackTo uint64
	Models       []modelView
	// Lineage is the env's models as a DAG, coloured by state (SVG).
	Lineage template.HTML
}

type modelView struct {
	Model, Snapshot string
	// HasRows: the warehouse reported Rows and Newest (an SQL model).
	HasRows     bool
	Rows        int64
	Newest      time.Time
	Frontier    time.Time
	Missing     string
	LastTick    time.Time
	OpenRepairs int
	Failures    int
	// LastFailure is the incumbent's last failed run, as text ("" when
	// none); LastFailureFinal: it was given up.
	LastFailure      string
	LastFailureFinal bool
	// Audits are the incumbent's failed audits, as text.
	Audits   []auditView
	Timeline template.HTML
	// HasWritten: the warehouse recorded a write (WrittenEnd: the end of
	// its interval; WrittenAt: when it committed).
	HasWritten            bool
	WrittenEnd, WrittenAt time.Time
	// Ready is the readiness frontier; Late, LateCause and LateReason say
	// whether the model is late and why (views: late.go).
	Ready      time.Time
	Late       bool
	LateCause  string
	LateReason string
}

type repairView struct {
	Env, Plan, Snapshot, Missing, Age string
}

type decisionView struct {
	Seq      uint64
	Plan     string
	Env      string
	Outcome  string
	Codes    []string
	At       time.Time
	Findings []events.Finding
}

// view is the dashboard at the server's clock, its coverage bars on one
// axis: window (24h, 7d or all) ending now.
func (s *Server) view(window string) view {
	v := view{Now: s.Clock().UTC(), Lag: s.Proj.Stats().Lag}
	var workers []Worker
	if s.Workers != nil {
		workers = s.Workers()
	}
	s.Proj.Read(func(st *projections.State) {
		v.Seq = st.Seq
		v.Axis = newAxis(st, window, v.Now)
		envs, repairs := views.Status(st, "", v.Now)
		if s.Workers != nil && len(workers) == 0 {
			views.NoWorker(envs)
		}
		inFlight := views.InFlight(st)
		inPlan := map[string]map[string]bool{} // env → models a plan in flight replaces
		for _, p := range inFlight {
			if p.Cancelled {
				continue
			}
			if inPlan[p.Env] == nil {
				inPlan[p.Env] = map[string]bool{}
			}
			for _, c := range st.Plans[p.Plan].Built.Candidates {
				inPlan[p.Env][c.Model] = true
			}
		}
		for _, e := range envs {
			ev := envView{Name: e.Env, Generation: e.Generation, Lineage: lineage(st, e, inPlan[e.Env])}
			if h := st.Env(e.Env).History; len(h) > 0 {
				switch g := h[len(h)-1]; {
				case g.Rollback != nil:
					ev.RolledBackTo = g.Rollback.ToGeneration
					ev.Since = fmt.Sprintf("rolled back from generation %d to generation %d's incumbents at seq %d, %s", g.Rollback.FromGeneration, g.Rollback.ToGeneration, g.Seq, g.At.UTC().Format(time.RFC3339))
				default:
					ev.Since = fmt.Sprintf("since plan %s, accepted at seq %d", g.Plan, g.Seq)
				}
			}
			for _, m := range e.Models {
				mv := modelView{
					Model: m.Model, Snapshot: m.Snapshot, Frontier: m.Frontier, LastTick: m.LastTick,
					Missing: strings.Join(interval.Set(m.Missing).Strings(), ", "), OpenRepairs: m.OpenRepairs, Failures: m.Failures,
					Timeline: timeline(st, m.Snapshot, v.Axis),
					Ready:    m.Ready, Late: m.Late, LateCause: string(m.LateCause), LateReason: m.LateReason,
				}
				if f := m.LastFailure; f != nil {
					mv.LastFailure, mv.LastFailureFinal = failureText(*f), f.Final
				}
				for _, a := range m.Audits {
					mv.Audits = append(mv.Audits, newAuditView(a))
				}
				ev.Models = append(ev.Models, mv)
			}
			v.Envs = append(v.Envs, ev)
		}
		for _, r := range repairs {
			v.Repairs = append(v.Repairs, repairView{Env: r.Env, Plan: r.Plan, Snapshot: r.Snapshot,
				Missing: strings.Join(interval.Set(r.Missing).Strings(), ", "), Age: (time.Duration(r.OpenForMS) * time.Millisecond).Round(time.Second).String()})
		}
		v.Retired = views.Retired(st)
		for _, p := range inFlight {
			fv := flightView{Plan: p.Plan, Env: p.Env, Percent: int(p.Fraction()*100 + 0.5),
				Done: fmt.Sprintf("%s of %s", p.Done, p.Total), Cancelled: p.Cancelled}
			for _, f := range p.Failures {
				fv.Failures = append(fv.Failures, failureView{Model: f.Model, Final: f.Final, Text: f.Snapshot + ": " + failureText(f)})
			}
			for _, m := range p.Models {
				fv.Models = append(fv.Models, newWorkView(m))
			}
			for _, a := range p.Audits {
				fv.Audits = append(fv.Audits, newAuditView(a))
			}
			v.InFlight = append(v.InFlight, fv)
		}
		for _, r := range views.Restating(st, "") {
			rv := restateView{Run: r.Run, Env: r.Env, Snapshot: r.Snapshot, Ranges: strings.Join(interval.Set(r.Ranges).Strings(), ", "), Seq: r.Seq}
			for _, m := range r.Models {
				rv.Models = append(rv.Models, newWorkView(m))
			}
			v.Restating = append(v.Restating, rv)
		}
		refs := st.Decisions
		for i := len(refs) - 1; i >= 0 && len(v.Decisions) < 10; i-- {
			pl := st.Plans[refs[i].Plan]
			if pl == nil {
				continue
			}
			d := pl.DecidedAt(refs[i].Seq)
			if d == nil {
				continue
			}
			v.Decisions = append(v.Decisions, decisionView{Seq: refs[i].Seq, Plan: d.Plan, Env: d.Env, Outcome: string(d.Outcome),
				Codes: d.Codes, At: d.EvaluatedAt, Findings: d.Findings})
		}
	})
	sort.SliceStable(v.Envs, func(i, j int) bool { return v.Envs[i].Name < v.Envs[j].Name })
	if s.Workers != nil {
		v.Roster = true
		for _, w := range workers {
			v.Workers = append(v.Workers, workerView{Worker: w, Seen: w.Age.Round(100*time.Millisecond).String() + " ago"})
		}
	}
	if s.Rows != nil {
		// Outside the projection's lock: the warehouse is I/O.
		for i := range v.Envs {
			for j := range v.Envs[i].Models {
				m := &v.Envs[i].Models[j]
				e := s.rows(m.Snapshot)
				m.HasRows, m.Rows, m.Newest = e.ok, e.rows, e.newest
				m.HasWritten, m.WrittenEnd, m.WrittenAt = e.wOK, e.wEnd, e.wAt
			}
		}
	}
	return v
}
