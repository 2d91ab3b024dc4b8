// Package server is tidemark's composition root: it builds every part
// `tidemark serve` runs, in one place and in the order they depend on each
// other, and hands each component the parts it needs. Open builds (the
// NATS server or connection, the engine, the worker roster, the warehouse
// and its request service, the work publisher, the notifier, the cluster
// membership, the command service and the dashboard's listener), Run
// runs (the dashboard, and on the writer only the scheduler, catch-up
// driver, janitors, work publisher, views syncer and notifier) until its
// context ends or the engine's projection fails, and Close takes down what
// Open built, in reverse order, from one list.
//
// Invariants: everything a command can observe (the work publisher's and
// the notifier's starting points, the engine's SQL check) is fixed before
// the command service accepts one; the loops that issue commands on their
// own run on the cluster's writer only; Close stops accepting commands
// before it gives the writer lease up, and gives it up before it closes
// the engine, so another member serves the writes while clients ask again.
//
// Importers: cmd/tidemark (serve, and its tests' harness, which open,
// run and close a Server as serve does).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/cluster"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/notify"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/sqlcheck"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/web"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// Config is everything a Server is built from (serve's flags).
type Config struct {
	// Node is the NATS server to embed, or the one to connect to
	// (natsnode.Config.NatsURL). Its DataDir also holds the default
	// DuckDB warehouse.
	Node natsnode.Config
	// Replicas is the event stream's replica count (3 on a cluster).
	Replicas int
	// Coalesce stores a group of concurrent completions as one group
	// message (engine.Config.Coalesce).
	Coalesce bool
	// Logger is every component's logger (each adds its subsystem).
	// Default slog.Default().
	Logger *slog.Logger

	// BuiltinWorker runs all work in-process instead of publishing it to
	// `tidemark worker` processes.
	BuiltinWorker bool
	// Warehouse is where SQL models are computed and views live: "" (with
	// BuiltinWorker: a DuckDB file in Node.DataDir; without: none), a
	// DuckDB file (BuiltinWorker only), a postgres:// DSN, or "none".
	Warehouse        string
	WarehouseOptions warehouse.Options

	// RateLimit bounds the commands per second one user may send (0: no
	// limit; transport.ServiceConfig.RateLimit).
	RateLimit float64
	// WorkAckWait, WorkMaxAttempts and WorkConcurrency configure the work
	// publisher (work.Publisher's AckWait, MaxDeliver and Attempts,
	// Concurrency).
	WorkAckWait                      time.Duration
	WorkMaxAttempts, WorkConcurrency int
	// JanitorEvery (0: never), JanitorGrace and Retain configure the
	// janitor that retires unused snapshot tables (scheduler.Janitor).
	JanitorEvery, JanitorGrace, Retain time.Duration

	// HTTP is the dashboard's, /metrics' and the health checks' address
	// ("": no HTTP; port 0: any free port, DashboardURL says which).
	HTTP string
	// Build is this build as /metrics shows it (tidemark_build_info).
	Build web.Build
	// Notify configures the notifier (its URL, Dashboard, Attempts,
	// Backoff, LateEvery; URL "": none). Open gives a copy of it the
	// engine's parts; Dashboard defaults to DashboardURL.
	Notify notify.Notifier
}

// Validate reports every problem of c, joined, each naming serve's flag.
func (c Config) Validate() error {
	var errs []error
	if c.JanitorEvery > 0 && c.JanitorGrace < commands.MinRetireGrace {
		errs = append(errs, fmt.Errorf("--janitor-grace %s: at least %s", c.JanitorGrace, commands.MinRetireGrace))
	}
	if c.Retain < commands.MinRetireGrace {
		errs = append(errs, fmt.Errorf("--retain %s: at least %s", c.Retain, commands.MinRetireGrace))
	}
	if c.Retain > commands.MaxRetain {
		// retire_tables refuses it: the janitor would never retire.
		errs = append(errs, fmt.Errorf("--retain %s: at most 100 years", c.Retain))
	}
	if c.WorkConcurrency < 1 || c.WorkMaxAttempts < 1 || c.WarehouseOptions.ModelTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--work-concurrency %d, --work-max-attempts %d, --model-timeout %s: each at least 1",
			c.WorkConcurrency, c.WorkMaxAttempts, c.WarehouseOptions.ModelTimeout))
	}
	if c.Notify.URL != "" {
		errs = append(errs, c.Notify.Validate())
	}
	errs = append(errs, c.Node.Validate(), engine.Config{Replicas: c.Replicas}.Validate(), Layout(c.BuiltinWorker, c.Warehouse))
	return errors.Join(errs...)
}

// Server is a running `tidemark serve`: Open, then Run, then Close.
type Server struct {
	cfg Config
	log *slog.Logger

	node      *natsnode.Node
	eng       *engine.Engine
	roster    *work.Roster
	wh        *warehouse.Warehouse // nil: no warehouse
	pub       *work.Publisher
	syncer    *sqlrun.Syncer // nil: no warehouse
	dropper   *sqlrun.Janitor
	notifier  *notify.Notifier // nil: no notifications
	member    *cluster.Member
	builtin   *work.Stats // the built-in worker's counts (its heartbeat)
	http      *http.Server
	ln        net.Listener // the dashboard's (nil: no HTTP)
	dashboard string

	joined  atomic.Pointer[cluster.Member] // set once joined (checkpoints follow the lease)
	closers []func(context.Context) error  // what Open built, closed in reverse
	ran     atomic.Bool
	closed  bool
}

// Open builds a Server from cfg: it validates cfg, starts (or connects
// to) NATS, opens the engine and every part serve runs, and starts
// accepting commands. On an error it closes what it built. ctx bounds the
// opening only.
func Open(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, roster: &work.Roster{}, builtin: &work.Stats{}}
	defer func() {
		if err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
		}
	}()
	if !cfg.Node.SyncAlways {
		s.log.Warn("fsync relaxed (--no-sync): acknowledged events can be lost if the machine crashes or loses power within the server's sync interval (2 minutes by default)")
	}
	if s.node, err = natsnode.Start(ctx, cfg.Node); err != nil {
		return nil, err
	}
	s.onClose(func(context.Context) error { s.node.Close(); return nil })
	if err := s.openEngine(ctx); err != nil {
		return nil, err
	}
	// Worker liveness: every worker's heartbeat (the built-in one's too)
	// feeds the roster the dashboard shows; status names it when a late
	// model has no live worker.
	stopRoster, err := s.roster.Subscribe(s.node.Conn())
	if err != nil {
		return nil, err
	}
	s.onClose(func(context.Context) error { stopRoster(); return nil })
	if err := s.openDataPlane(ctx); err != nil {
		return nil, err
	}
	// The work publisher's and the notifier's starting points are fixed
	// before any command is accepted: a command accepted before would
	// make no work and no notice.
	if err := s.pub.Prepare(ctx); err != nil {
		return nil, err
	}
	if err := s.openNotifier(ctx); err != nil {
		return nil, err
	}
	// One writer among the engines sharing the stream: this one forwards
	// commands that write while another holds the lease.
	if s.member, err = cluster.Join(ctx, cluster.Config{Handler: s.eng, Log: s.eng.Log(), Proj: s.eng.Projection(), CatchUp: s.eng.CatchUp, Logger: s.log}); err != nil {
		return nil, err
	}
	s.joined.Store(s.member)
	s.onClose(func(ctx context.Context) error { s.member.Leave(ctx); return nil })
	svc, err := s.member.Serve(s.node.Conn(), transport.ServiceConfig{Logger: s.log, RateLimit: cfg.RateLimit})
	if err != nil {
		return nil, err
	}
	s.onClose(func(context.Context) error { return svc.Stop() })
	if err := s.openHTTP(); err != nil {
		return nil, err
	}
	if s.notifier != nil && s.notifier.Dashboard == "" {
		s.notifier.Dashboard = s.dashboard
	}
	s.log.Info("tidemark serving", "nats", s.NATSURL(), "http", s.dashboard, "data_dir", cfg.Node.DataDir,
		"fsync_every_append", cfg.Node.SyncAlways, "coalesce", cfg.Coalesce, "builtin_worker", cfg.BuiltinWorker)
	return s, nil
}

// onClose adds fn to what Close runs (in reverse order of adding).
func (s *Server) onClose(fn func(context.Context) error) { s.closers = append(s.closers, fn) }

// openEngine opens the engine with the SQL check and the checkpoint gate
// serve gives it.
func (s *Server) openEngine(ctx context.Context) error {
	cfg := engine.Config{Replicas: s.cfg.Replicas, Logger: s.log, Coalesce: s.cfg.Coalesce,
		LiveWorkers: func() int { return len(s.roster.Live()) }}
	// Model SQL is parsed and bound before it is registered, whoever sends
	// the command (docs/security.md); upstream models are read from the
	// engine's projection (s.eng is set before any command).
	check := sqlcheck.ForEngine(func(fn func(*projections.State)) { s.eng.Projection().Read(fn) })
	noSQL := noSQLReason(s.cfg)
	cfg.Check = func(ctx context.Context, c commands.Command) error {
		if err := check(ctx, c); err != nil {
			return err
		}
		if noSQL != "" {
			s.warnNoSQL(c, noSQL)
		}
		return nil
	}
	// Only the writer writes checkpoints as it folds: every member folds
	// the same stream, and one writing is enough for all to load. Each
	// still writes one when it stops (engine.Close).
	cfg.CheckpointWhen = func() bool {
		if m := s.joined.Load(); m != nil {
			on, _ := m.Writing()
			return on
		}
		return false
	}
	eng, err := engine.Open(ctx, s.node.Conn(), cfg)
	if err != nil {
		return err
	}
	s.eng = eng
	s.onClose(s.eng.Close)
	return nil
}

// liveWorkers counts the live workers for the notifier (its no_worker
// cause): -1, not known, until the roster has settled (heard every worker
// beating at the default interval), so that a restarted serve does not
// notify a model late for no_worker, once and for good, while its workers
// run. (status, asked again, may say no_worker in that window.)
func (s *Server) liveWorkers() int {
	if !s.roster.Settled() {
		return -1
	}
	return len(s.roster.Live())
}

// noSQLReason is why nothing computes an SQL model's SQL under cfg: serve
// opens no warehouse ("": it opens one, and something computes there).
func noSQLReason(cfg Config) string {
	switch {
	case cfg.Warehouse == "none" && cfg.BuiltinWorker:
		return "serve runs with --builtin-worker --warehouse none, so an SQL model's work is recorded done without computing its SQL and no view is swapped; give serve a --warehouse"
	case !cfg.BuiltinWorker && (cfg.Warehouse == "" || cfg.Warehouse == "none"):
		return "serve has no --warehouse, so its views are never swapped and only `tidemark worker --exec` takes its work; start serve with --warehouse postgres://… and its workers with the same --warehouse"
	}
	return ""
}

// warnNoSQL logs each SQL model c registers: without a warehouse nothing
// computes its SQL (registering is allowed: its file may be shared with a
// serve that has one).
func (s *Server) warnNoSQL(c commands.Command, why string) {
	var regs []commands.RegisterSnapshot
	switch r := c.(type) {
	case *commands.RegisterSnapshot:
		regs = append(regs, *r)
	case *commands.RegisterSnapshots:
		regs = r.Snapshots
	}
	for _, r := range regs {
		if r.SQL != "" {
			s.log.Warn("an SQL model registered, but nothing computes its SQL: "+why, "model", r.Model, "version", r.Version)
		}
	}
}

// openDataPlane builds the work publisher and, when serve has one, the
// warehouse with its request service, views syncer and janitor.
//
// All work (plan backfills, scheduled runs, catch-up, repair) is derived
// from the stream by the one publisher: published to `tidemark worker`
// processes, or run in-process by the built-in worker on a bounded pool,
// each failed step recorded (fail_work) and tried again at most
// WorkMaxAttempts times.
func (s *Server) openDataPlane(ctx context.Context) error {
	cfg, eng := s.cfg, s.eng
	proj := eng.Projection()
	s.pub = &work.Publisher{Log: eng.Log(), Clock: eng.Now, Logger: s.log, AckWait: cfg.WorkAckWait, MaxDeliver: cfg.WorkMaxAttempts,
		Concurrency: cfg.WorkConcurrency, Attempts: cfg.WorkMaxAttempts, Reporter: eng}
	// The built-in worker records work done; with a warehouse it does so
	// once the SQL runner has computed it.
	builtin := &inproc.Worker{Handler: eng, Actor: "worker:builtin"}
	if cfg.BuiltinWorker {
		s.pub.Runner = builtin
		s.pub.Stats = s.builtin
	} else {
		// Items published to workers carry their SQL, so that `tidemark
		// worker --warehouse` (or any worker) can compute them; each item
		// goes out as its batches, any worker taking any, a child's batch
		// waiting for its parent's; workers check the layout they join.
		s.pub.SQL = sqlrun.StepSQL(proj)
		s.pub.Progress, s.pub.Tables, s.pub.Gone = work.ProgressFrom(proj), work.TablesFrom(proj), work.GoneFrom(proj)
		s.pub.Metadata = map[string]string{LayoutKey: layoutName(cfg.Warehouse)}
	}
	// The data plane: SQL models computed in the warehouse before their
	// work is recorded, environments' views swapped on promotion, query
	// and verify served. One process owns a DuckDB file: without the
	// built-in worker, serve opens a warehouse only when one is named (a
	// Postgres the workers share).
	if why := noSQLReason(cfg); why != "" {
		s.log.Info("no warehouse: models without SQL only (" + why + ")")
		return nil
	}
	dsn := s.warehouseDSN()
	wh, err := warehouse.Open(ctx, dsn, cfg.WarehouseOptions)
	if err != nil {
		return err
	}
	s.wh = wh
	s.onClose(func(context.Context) error { return wh.Close() })
	if cfg.BuiltinWorker {
		s.pub.Runner = &sqlrun.Runner{WH: wh, Proj: proj, Done: builtin,
			Log: s.log.With("subsystem", "sqlrun"), Timeout: cfg.WarehouseOptions.ModelTimeout, Clock: eng.Now}
		// Items that write or read a common table run in stream order;
		// the others beside each other.
		s.pub.Tables = work.TablesFrom(proj)
	} else {
		// batch_concurrency's default: the workers' warehouse's.
		s.pub.BatchConcurrency = wh.BatchConcurrency()
	}
	s.syncer = &sqlrun.Syncer{WH: wh, Proj: proj, Log: s.log.With("subsystem", "views")}
	s.dropper = &sqlrun.Janitor{WH: wh, Proj: proj, Log: s.log.With("subsystem", "janitor")}
	stopWH, err := sqlrun.Serve(s.node.Conn(), wh, proj, 0, s.log.With("subsystem", "warehouse"))
	if err != nil {
		return err
	}
	s.onClose(func(context.Context) error { stopWH(); return nil })
	s.log.Info("warehouse", "engine", wh.Engine(), "dsn", warehouse.Redact(dsn))
	return nil
}

// warehouseDSN is the warehouse serve opens: Config.Warehouse, or the
// default DuckDB file in the data directory.
func (s *Server) warehouseDSN() string {
	if s.cfg.Warehouse == "" {
		return filepath.Join(s.cfg.Node.DataDir, "warehouse.duckdb")
	}
	return s.cfg.Warehouse
}

// openNotifier prepares the notifier (Config.Notify.URL set): decisions,
// work given up and lateness changes, read from the stream after a cursor
// of their own.
func (s *Server) openNotifier(ctx context.Context) error {
	if s.cfg.Notify.URL == "" {
		return nil
	}
	n := s.cfg.Notify
	n.Log, n.View, n.Now, n.Logger = s.eng.Log(), s.eng.Projection().Read, s.eng.Now, s.log
	n.LiveWorkers = s.liveWorkers
	m, err := notify.NewMetrics(s.eng.Registry())
	if err != nil {
		return err
	}
	n.SetMetrics(m)
	if err := n.Prepare(ctx); err != nil {
		return err
	}
	s.notifier = &n
	return nil
}

// openHTTP builds the dashboard and listens on Config.HTTP (Run serves).
func (s *Server) openHTTP() error {
	if s.cfg.HTTP == "" {
		return nil
	}
	eng, proj, member := s.eng, s.eng.Projection(), s.member
	ws := &web.Server{Proj: proj, Log: eng.Log().Reader(), Registry: eng.Registry(), Clock: eng.Now, Logger: s.log.With("subsystem", "http"),
		Workers: func() []web.Worker { return workersOf(s.roster.Live(), time.Now()) }, Build: s.cfg.Build,
		Writer: func() (string, bool) { on, _ := member.Writing(); return member.Node(), on }}
	if wh := s.wh; wh != nil {
		ws.Rows = func(ctx context.Context, snapshot string) (int64, time.Time, bool) {
			return sqlrun.Rows(ctx, wh, proj, snapshot)
		}
		ws.Written = func(ctx context.Context, snapshot string) (time.Time, time.Time, bool) {
			return sqlrun.LastWritten(ctx, wh, proj, snapshot)
		}
		ws.Diff = func(ctx context.Context, plan string) ([]web.PlanDiff, error) {
			rep, err := sqlrun.DiffPlan(ctx, wh, proj, plan, "")
			return planDiffs(rep), err
		}
	}
	h, err := ws.Handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("--http %s: %w", s.cfg.HTTP, err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.dashboard = "http://" + ln.Addr().String()
	s.onClose(func(ctx context.Context) error {
		if !s.ran.Load() {
			return ln.Close() // never served: Shutdown does not know the listener
		}
		// Run shut the dashboard down as gracefully as it could (5s); what
		// is left (a browser's /live stream, which never ends on its own)
		// is closed here, as serve's exit did: not an error of Close.
		_ = s.http.Close()
		return nil
	})
	return nil
}

// NATSURL is the embedded server's client URL, or "in-process only" when
// it listens on none.
func (s *Server) NATSURL() string {
	if u := s.node.ClientURL(); u != "" {
		return u
	}
	return "in-process only"
}

// DashboardURL is the dashboard's base URL ("": no HTTP).
func (s *Server) DashboardURL() string { return s.dashboard }

// Run serves the dashboard and, whenever this member is the cluster's
// writer, runs the loops that issue commands on their own, until ctx ends
// (nil) or the engine's projection stops for good (its error: every
// command would be refused). It returns once those loops have stopped;
// Close then stops the rest. Run is called at most once.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("server: Run called twice")
	}
	var wg sync.WaitGroup
	if s.http != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("http server", "err", err)
			}
		}()
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	wg.Add(1)
	go func() { defer wg.Done(); s.whileWriting(lctx, s.loops()...) }()
	var failed error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: draining the command service")
	case <-s.eng.Failed():
		failed = s.eng.Err()
		s.log.Error("shutting down: the projection stopped", "err", failed)
	}
	// Stop the dashboard and the writer's loops; Close then stops
	// accepting commands, lets in-flight ones finish (still the writer)
	// and gives the lease up.
	if s.http != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = s.http.Shutdown(sctx)
		cancel()
	}
	stop()
	wg.Wait()
	return failed
}

// loops are the loops that run on the writer only (a cluster's other
// members start them when they take the writer lease): one scheduler, one
// work publisher and one sender of notifications per cluster.
func (s *Server) loops() []func(context.Context) {
	eng, cfg := s.eng, s.cfg
	// The catch-up driver records each strict retry once the request's
	// work is done; the janitor retires the snapshot tables nothing uses
	// any more, keeping every table an incumbent used for Retain after
	// its demotion (a rollback within it finds its tables); the warehouse
	// janitor drops them.
	sched := &scheduler.Scheduler{Handler: eng, Proj: eng.Projection(), Clock: eng.Now, Logger: s.log}
	catchUps := &scheduler.CatchUps{Handler: eng, Proj: eng.Projection(), Clock: eng.Now, Logger: s.log}
	janitor := &scheduler.Janitor{Handler: eng, Proj: eng.Projection(), Clock: eng.Now, Logger: s.log,
		Every: cfg.JanitorEvery, Grace: cfg.JanitorGrace, Retain: cfg.Retain}
	loops := []func(context.Context){
		func(ctx context.Context) { _ = sched.Run(ctx) },
		func(ctx context.Context) { _ = catchUps.Run(ctx) },
		func(ctx context.Context) { _ = janitor.Run(ctx) },
		func(ctx context.Context) { s.logStop("work publisher", ctx, s.pub.Run(ctx)) },
	}
	if cfg.BuiltinWorker {
		host, _ := os.Hostname()
		name := fmt.Sprintf("builtin-%s-%d", host, os.Getpid())
		loops = append(loops, func(ctx context.Context) { work.Beat(ctx, s.node.Conn(), name, work.KindBuiltin, 0, s.builtin) })
	}
	if s.syncer != nil {
		loops = append(loops,
			func(ctx context.Context) { s.logStop("views syncer", ctx, s.syncer.Run(ctx)) },
			func(ctx context.Context) { s.logStop("warehouse janitor", ctx, s.dropper.Run(ctx)) })
	}
	if s.notifier != nil {
		loops = append(loops, func(ctx context.Context) { _ = s.notifier.Run(ctx) })
	}
	return loops
}

// logStop logs a loop that stopped with err while ctx had not ended.
func (s *Server) logStop(what string, ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		s.log.Error(what+" stopped", "err", err)
	}
}

// whileWriting runs loops each time the member becomes the writer, and
// stops them (waiting for them to return) when it stops being the writer,
// until ctx ends.
func (s *Server) whileWriting(ctx context.Context, loops ...func(context.Context)) {
	for {
		if err := s.member.AwaitWriting(ctx); err != nil {
			return
		}
		s.log.Info("this engine is the writer: starting the scheduler, the catch-up driver, the janitor, the work publisher and the notifier")
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, loop := range loops {
			wg.Add(1)
			go func() { defer wg.Done(); loop(lctx) }()
		}
		for on := true; on; {
			var changed <-chan struct{}
			on, changed = s.member.Writing()
			if !on {
				break
			}
			select {
			case <-ctx.Done():
				on = false
			case <-changed:
			}
		}
		stop()
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
		s.log.Info("this engine is no longer the writer: its loops stopped")
	}
}

// Close stops the command service (in-flight commands finish), gives the
// writer lease up, and closes the engine, the warehouse and the NATS
// server: what Open built, in reverse. It returns the first error of the
// command service's stop, the warehouse's close or (never run) the
// dashboard listener's close; the engine logs a failed final checkpoint,
// which does not fail Close. Close after Run has
// returned, or instead of Run; a second Close does nothing.
func (s *Server) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	var first error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// workersOf is the roster's live workers as the dashboard shows them.
func workersOf(live []work.Worker, now time.Time) []web.Worker {
	out := make([]web.Worker, len(live))
	for i, w := range live {
		out[i] = web.Worker{Name: w.Name, Kind: w.Kind, User: w.User, Done: w.Done, Failed: w.Failed, InFlight: w.InFlight,
			Started: w.Started, LastSeen: w.LastSeen, Age: max(now.Sub(w.LastSeen), 0)}
	}
	return out
}

// planDiffs is a plan's diff as the dashboard's plan page shows it.
func planDiffs(rep sqlrun.DiffReply) []web.PlanDiff {
	out := make([]web.PlanDiff, 0, len(rep.Models))
	for _, m := range rep.Models {
		d := web.PlanDiff{Model: m.Model, Candidate: m.Candidate, Incumbent: m.Incumbent, Skipped: m.Skipped}
		if t := m.TableDiff; t != nil {
			d.CandidateRows, d.IncumbentRows, d.OnlyInCandidate, d.OnlyInIncumbent, d.Changed, d.Grain =
				t.CandidateRows, t.IncumbentRows, t.OnlyInCandidate, t.OnlyInIncumbent, t.Changed, t.Grain
		}
		out = append(out, d)
	}
	return out
}
