package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
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

func newServeCmd() *cobra.Command {
	var (
		dataDir, natsURL, listen, logFormat, httpAddr string
		noSync, builtinWorker, noCoalesce             bool
		warehouseDSN                                  string
		whOpts                                        warehouse.Options
		replicas                                      int
		rateLimit                                     float64
		workAckWait                                   time.Duration
		workMaxAttempts, workConcurrency              int
		clusterName, clusterListen, serverName        string
		authFile, user, password, tlsCert, tlsKey     string
		routes                                        []string
		janitorEvery, janitorGrace, retain            time.Duration
		notifier                                      notify.Notifier
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine: JetStream (embedded or external), the command service and the scheduler",
		Long: "serve runs an embedded NATS server with JetStream (or connects to --nats-url), the\n" +
			"tidemark command service (NATS micro service \"tidemark\"), the live projections and the\n" +
			"scheduler on the wall clock, until interrupted. Every append is fsynced before it is\n" +
			"acknowledged unless --no-sync is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat)
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			ncfg := natsnode.Config{DataDir: dataDir, NatsURL: natsURL, SyncAlways: !noSync,
				ClusterName: clusterName, ClusterListen: clusterListen, Routes: routes, ServerName: serverName,
				AuthFile: authFile, User: user, Password: password, TLSCert: tlsCert, TLSKey: tlsKey, Name: "tidemark-engine"}
			if password == "" {
				ncfg.Password = os.Getenv("TIDEMARK_PASSWORD")
			}
			if clusterName != "" && serverName == "" {
				ncfg.ServerName = "tidemark-" + strings.ReplaceAll(clusterListen, ":", "-")
			}
			if natsURL == "" {
				ncfg.Listen = listen
			}
			// Concurrent completions are stored together: a group of them is
			// one group message (engine.Config.Coalesce), one fsync and one
			// store for the group (docs/performance.md).
			// Worker liveness: every worker's heartbeat (the built-in
			// one's too) feeds the roster the dashboard shows; status
			// names it when a late model has no live worker.
			roster := &work.Roster{}
			cfg := engine.Config{Replicas: replicas, Logger: log, Coalesce: !noCoalesce,
				LiveWorkers: func() int { return len(roster.Live()) }}
			// Model SQL is parsed and bound before it is registered, whoever
			// sends the command (docs/security.md); upstream models are read
			// from the engine's projection (eng is set before any command).
			var eng *engine.Engine
			check := sqlcheck.ForEngine(func(fn func(*projections.State)) { eng.Projection().Read(fn) })
			// Without a warehouse nothing computes an SQL model's SQL:
			// registering one is allowed (its file may be shared with a
			// serve that has one) but said in the log.
			var noSQL string
			cfg.Check = func(ctx context.Context, c commands.Command) error {
				if err := check(ctx, c); err != nil {
					return err
				}
				if noSQL == "" {
					return nil
				}
				regs := []commands.RegisterSnapshot{}
				switch r := c.(type) {
				case *commands.RegisterSnapshot:
					regs = append(regs, *r)
				case *commands.RegisterSnapshots:
					regs = r.Snapshots
				}
				for _, r := range regs {
					if r.SQL != "" {
						log.Warn("an SQL model registered, but nothing computes its SQL: "+noSQL, "model", r.Model, "version", r.Version)
					}
				}
				return nil
			}
			// Only the writer writes checkpoints as it folds: every member
			// folds the same stream, and one writing is enough for all to
			// load. Each still writes one when it stops (engine.Close).
			var joined atomic.Pointer[cluster.Member]
			cfg.CheckpointWhen = func() bool {
				m := joined.Load()
				on := false
				if m != nil {
					on, _ = m.Writing()
				}
				return on
			}
			var janitorErr error
			if janitorEvery > 0 && janitorGrace < commands.MinRetireGrace {
				janitorErr = fmt.Errorf("--janitor-grace %s: at least %s", janitorGrace, commands.MinRetireGrace)
			}
			if retain < commands.MinRetireGrace {
				janitorErr = errors.Join(janitorErr, fmt.Errorf("--retain %s: at least %s", retain, commands.MinRetireGrace))
			}
			if retain > commands.MaxRetain {
				// retire_tables refuses it: the janitor would never retire.
				janitorErr = errors.Join(janitorErr, fmt.Errorf("--retain %s: at most 100 years", retain))
			}
			var workErr error
			if workConcurrency < 1 || workMaxAttempts < 1 || whOpts.ModelTimeout <= 0 {
				workErr = fmt.Errorf("--work-concurrency %d, --work-max-attempts %d, --model-timeout %s: each at least 1", workConcurrency, workMaxAttempts, whOpts.ModelTimeout)
			}
			var notifyErr error
			if notifier.URL != "" {
				notifyErr = notifier.Validate()
			}
			if err := errors.Join(ncfg.Validate(), cfg.Validate(), janitorErr, workErr, notifyErr, serveLayout(builtinWorker, warehouseDSN)); err != nil {
				return &exitError{kind: usage, err: err}
			}
			if noSync {
				log.Warn("fsync relaxed (--no-sync): acknowledged events can be lost if the machine crashes or loses power within the server's sync interval (2 minutes by default)")
			}
			ctx := cmd.Context()
			node, err := natsnode.Start(ctx, ncfg)
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			defer node.Close()
			eng, err = engine.Open(ctx, node.Conn(), cfg)
			if err != nil {
				return &exitError{kind: usage, err: storeHint(err, dataDir, natsURL)}
			}
			// All work (plan backfills, scheduled runs, catch-up, repair) is
			// derived from the stream by the one publisher: published to
			// `tidemark worker` processes, or run in-process with
			// --builtin-worker.
			// The built-in worker runs items on a bounded pool, each failed
			// step recorded (fail_work: a RunFailed with its error) and
			// tried again at most --work-max-attempts times.
			pub := &work.Publisher{Log: eng.Log(), Clock: eng.Now, Logger: log, AckWait: workAckWait, MaxDeliver: workMaxAttempts,
				Concurrency: workConcurrency, Attempts: workMaxAttempts, Reporter: eng}
			var syncer *sqlrun.Syncer
			var dropper *sqlrun.Janitor
			var wh *warehouse.Warehouse
			stopRoster, err := roster.Subscribe(node.Conn())
			if err != nil {
				eng.Close(context.WithoutCancel(ctx))
				return &exitError{kind: usage, err: err}
			}
			defer stopRoster()
			builtinStats := &work.Stats{}
			if builtinWorker {
				pub.Runner = &inproc.Worker{Handler: eng, Actor: "worker:builtin"}
				pub.Stats = builtinStats
			} else {
				// Items published to workers carry their SQL, so that
				// `tidemark worker --warehouse` (or any worker) can
				// compute them.
				pub.SQL = sqlrun.StepSQL(eng.Projection())
				// Each item goes out as its batches, any worker taking
				// any; a child's batch waits for its parent's.
				pub.Progress, pub.Tables, pub.Gone = work.ProgressFrom(eng.Projection()), work.TablesFrom(eng.Projection()), work.GoneFrom(eng.Projection())
				// Workers check the layout they join (workerServes).
				pub.Metadata = map[string]string{layoutKey: serveWarehouse(warehouseDSN)}
			}
			// The data plane: SQL models computed in the warehouse before
			// their work is recorded (by the built-in worker, or by
			// `tidemark worker --warehouse` processes sharing it),
			// environments' views swapped on promotion, query and verify
			// served. One process owns a DuckDB file: without the built-in
			// worker, serve opens a warehouse only when --warehouse names
			// one (a Postgres the workers share).
			if builtinWorker || (warehouseDSN != "" && warehouseDSN != "none") {
				wh, err = openWarehouse(ctx, warehouseDSN, dataDir, whOpts)
				if err != nil {
					eng.Close(context.WithoutCancel(ctx))
					return &exitError{kind: usage, err: err}
				}
			}
			switch {
			case wh == nil && builtinWorker:
				noSQL = "serve runs with --builtin-worker --warehouse none, so an SQL model's work is recorded done without computing its SQL and no view is swapped; give serve a --warehouse"
			case wh == nil:
				noSQL = "serve has no --warehouse, so its views are never swapped and only `tidemark worker --exec` takes its work; start serve with --warehouse postgres://… and its workers with the same --warehouse"
			}
			if noSQL != "" {
				log.Info("no warehouse: models without SQL only (" + noSQL + ")")
			}
			if wh != nil {
				defer wh.Close()
				if builtinWorker {
					pub.Runner = &sqlrun.Runner{WH: wh, Proj: eng.Projection(), Done: &inproc.Worker{Handler: eng, Actor: "worker:builtin"},
						Log: log.With("subsystem", "sqlrun"), Timeout: whOpts.ModelTimeout, Clock: eng.Now}
					// Items that write or read a common table run in
					// stream order; the others beside each other.
					pub.Tables = work.TablesFrom(eng.Projection())
				}
				if !builtinWorker {
					// batch_concurrency's default: the workers' warehouse's.
					pub.BatchConcurrency = wh.BatchConcurrency()
				}
				syncer = &sqlrun.Syncer{WH: wh, Proj: eng.Projection(), Log: log.With("subsystem", "views")}
				dropper = &sqlrun.Janitor{WH: wh, Proj: eng.Projection(), Log: log.With("subsystem", "janitor")}
				stopWH, err := sqlrun.Serve(node.Conn(), wh, eng.Projection(), 0, log.With("subsystem", "warehouse"))
				if err != nil {
					eng.Close(context.WithoutCancel(ctx))
					return &exitError{kind: usage, err: err}
				}
				defer stopWH()
				log.Info("warehouse", "engine", wh.Engine(), "dsn", warehouse.Redact(warehouseDSNOr(warehouseDSN, dataDir)))
			}
			if err := pub.Prepare(ctx); err != nil {
				eng.Close(context.WithoutCancel(ctx))
				return &exitError{kind: usage, err: err}
			}
			// Notifications (--notify-url): decisions, work given up and
			// lateness changes, read from the stream after a cursor of
			// their own, fixed before any command is accepted.
			if notifier.URL != "" {
				notifier.Log, notifier.View, notifier.Now, notifier.Logger = eng.Log(), eng.Projection().Read, eng.Now, log
				m, err := notify.NewMetrics(eng.Registry())
				if err != nil {
					eng.Close(context.WithoutCancel(ctx))
					return &exitError{kind: usage, err: err}
				}
				notifier.SetMetrics(m)
				if err := notifier.Prepare(ctx); err != nil {
					eng.Close(context.WithoutCancel(ctx))
					return &exitError{kind: usage, err: err}
				}
			}
			// One writer among the engines sharing the stream: this one
			// forwards commands that write while another holds the lease.
			member, err := cluster.Join(ctx, cluster.Config{Handler: eng, Log: eng.Log(), Proj: eng.Projection(), CatchUp: eng.CatchUp, Logger: log})
			if err != nil {
				eng.Close(context.WithoutCancel(ctx))
				return &exitError{kind: usage, err: err}
			}
			joined.Store(member)
			stop := func() {
				member.Leave(context.WithoutCancel(ctx))
				eng.Close(context.WithoutCancel(ctx))
			}
			svc, err := member.Serve(node.Conn(), transport.ServiceConfig{Logger: log, RateLimit: rateLimit})
			if err != nil {
				stop()
				return &exitError{kind: usage, err: err}
			}
			var httpSrv *http.Server
			dashboard := ""
			if httpAddr != "" {
				ws := &web.Server{Proj: eng.Projection(), Log: eng.Log().Reader(), Registry: eng.Registry(), Clock: eng.Now, Logger: log.With("subsystem", "http"),
					Workers: func() []web.Worker { return webWorkers(roster.Live(), time.Now()) }, Build: webBuild(),
					Writer: func() (string, bool) { on, _ := member.Writing(); return member.Node(), on }}
				if wh != nil {
					ws.Rows = func(ctx context.Context, snapshot string) (int64, time.Time, bool) {
						return sqlrun.Rows(ctx, wh, eng.Projection(), snapshot)
					}
					ws.Written = func(ctx context.Context, snapshot string) (time.Time, time.Time, bool) {
						return sqlrun.LastWritten(ctx, wh, eng.Projection(), snapshot)
					}
					ws.Diff = func(ctx context.Context, plan string) ([]web.PlanDiff, error) {
						rep, err := sqlrun.DiffPlan(ctx, wh, eng.Projection(), plan, "")
						return webDiffs(rep), err
					}
				}
				h, err := ws.Handler()
				if err != nil {
					_ = svc.Stop()
					stop()
					return &exitError{kind: usage, err: err}
				}
				ln, err := net.Listen("tcp", httpAddr)
				if err != nil {
					_ = svc.Stop()
					stop()
					return &exitError{kind: usage, err: fmt.Errorf("--http %s: %w", httpAddr, err)}
				}
				httpSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
				dashboard = "http://" + ln.Addr().String()
				go func() {
					if err := httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
						log.Error("http server", "err", err)
					}
				}()
			}
			if notifier.Dashboard == "" {
				notifier.Dashboard = dashboard
			}
			sched := &scheduler.Scheduler{Handler: eng, Proj: eng.Projection(), Clock: eng.Now, Logger: log}
			// The catch-up driver records each strict retry once the
			// request's work is done (by the publisher's sink).
			catchUps := &scheduler.CatchUps{Handler: eng, Proj: eng.Projection(), Clock: eng.Now, Logger: log}
			// The janitor retires the snapshot tables nothing uses any
			// more (TableRetired); the warehouse drops them (dropper).
			// It keeps every table an incumbent used for --retain after its
			// demotion, so a rollback within it finds its tables.
			janitor := &scheduler.Janitor{Handler: eng, Proj: eng.Projection(), Clock: eng.Now, Logger: log, Every: janitorEvery, Grace: janitorGrace, Retain: retain}
			// The loops that issue commands on their own, the one work
			// publisher and the one notifier run on the writer only (a
			// cluster's other nodes start them when their engine takes the
			// writer lease): one sender of notifications per cluster.
			schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				whileWriting(schedCtx, member, log,
					func(ctx context.Context) { _ = sched.Run(ctx) },
					func(ctx context.Context) { _ = catchUps.Run(ctx) },
					func(ctx context.Context) { _ = janitor.Run(ctx) },
					func(ctx context.Context) {
						if err := pub.Run(ctx); err != nil && ctx.Err() == nil {
							log.Error("work publisher stopped", "err", err)
						}
					},
					func(ctx context.Context) {
						if builtinWorker {
							host, _ := os.Hostname()
							work.Beat(ctx, node.Conn(), fmt.Sprintf("builtin-%s-%d", host, os.Getpid()), work.KindBuiltin, 0, builtinStats)
						}
					},
					func(ctx context.Context) {
						if syncer != nil {
							if err := syncer.Run(ctx); err != nil && ctx.Err() == nil {
								log.Error("views syncer stopped", "err", err)
							}
						}
					},
					func(ctx context.Context) {
						if notifier.URL != "" {
							_ = notifier.Run(ctx)
						}
					},
					func(ctx context.Context) {
						if dropper != nil {
							if err := dropper.Run(ctx); err != nil && ctx.Err() == nil {
								log.Error("warehouse janitor stopped", "err", err)
							}
						}
					})
			}()
			where := node.ClientURL()
			if where == "" {
				where = "in-process only"
			}
			log.Info("tidemark serving", "nats", where, "http", dashboard, "data_dir", dataDir, "fsync_every_append", !noSync, "coalesce", cfg.Coalesce, "builtin_worker", builtinWorker)
			fmt.Fprintf(cmd.OutOrStdout(), "tidemark serving on %s (Ctrl-C to stop)\n", where)
			if dashboard != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "dashboard on %s (metrics %s/metrics)\n", dashboard, dashboard)
			}
			var failed error
			select {
			case <-ctx.Done():
				log.Info("shutting down: draining the command service")
			case <-eng.Failed():
				// The projection stopped for good (a damaged store): every
				// command would be refused, so stop and say why.
				failed = eng.Err()
				log.Error("shutting down: the projection stopped", "err", failed)
			}
			// Stop the scheduler and the writer's loops, stop accepting
			// commands and let in-flight ones finish (still the writer:
			// the writes are carried out here), then give the lease up at
			// once, so that another member serves the writes while the
			// clients still ask again (transport.Client.NoServiceWait),
			// and close the engine.
			if httpSrv != nil {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = httpSrv.Shutdown(sctx)
				cancel()
			}
			stopSched()
			wg.Wait()
			_ = svc.Stop()
			member.Leave(context.Background())
			if err := eng.Close(context.Background()); err != nil {
				return err
			}
			if failed != nil {
				return &exitError{kind: usage, err: storeHint(failed, dataDir, natsURL)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "tidemark-data", "directory of the embedded server's JetStream store")
	f.StringVar(&natsURL, "nats-url", "", "connect to this NATS server instead of embedding one")
	f.StringVar(&listen, "listen", "127.0.0.1:4222", "client address of the embedded NATS server")
	f.BoolVar(&noSync, "no-sync", false, "do not fsync every append (faster; risks losing acknowledged events on a machine crash)")
	f.BoolVar(&noCoalesce, "no-coalesce", false, "store each event as its own message on its own subject instead of a group of concurrent completions as one group message (one store and, under fsync, one fsync per event: slower; for consumers that filter the stream by subject on the server)")
	f.StringVar(&warehouseDSN, "warehouse", "", "where SQL models are computed and environments' views live: a DuckDB file, with --builtin-worker only (its default: DATA-DIR/warehouse.duckdb; one process owns it), postgres://… for a Postgres shared with tidemark worker --warehouse processes (serve then swaps the views and answers query and verify), or none")
	warehouseFlags(f, &whOpts, true)
	f.BoolVar(&builtinWorker, "builtin-worker", false, "run all work (backfill, scheduled, catch-up, repair) in-process, recording it as done at once, instead of publishing it to tidemark worker processes (demos and tests)")
	f.IntVar(&replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&authFile, "auth", "", "users and permissions for the embedded server (a nats-server config, see docs/auth.conf)")
	f.StringVar(&user, "user", "", "the engine's own user with --auth (an admin)")
	f.StringVar(&password, "password", "", "the engine's password (default $TIDEMARK_PASSWORD)")
	f.StringVar(&tlsCert, "tls-cert", "", "PEM certificate: require TLS from network clients")
	f.StringVar(&tlsKey, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&clusterName, "cluster", "", "run the embedded server as a member of this JetStream cluster")
	f.StringVar(&clusterListen, "cluster-listen", "", "cluster (route) address of the embedded server, HOST:PORT")
	f.StringSliceVar(&routes, "routes", nil, "routes to the other cluster members, nats://HOST:PORT (comma-separated)")
	f.StringVar(&serverName, "server-name", "", "embedded server name, unique in a cluster (default from --cluster-listen)")
	f.DurationVar(&workAckWait, "work-ack-wait", work.DefaultAckWait, "redeliver a work item when its worker is silent this long (the work consumer the engine provisions; workers heartbeat every third of it)")
	f.IntVar(&workMaxAttempts, "work-max-attempts", work.DefaultMaxDeliver, "attempts at a work item before it is given up, its last failure recorded final (the work consumer's max deliver; the built-in worker's attempts at an item whose model fails, with a backoff from 1s, doubling, at most 10s)")
	f.IntVar(&workConcurrency, "work-concurrency", work.DefaultConcurrency, "work items the built-in worker computes at once (items on tables another item writes wait for it; scheduled and repair work first, and plan work on at most this many minus one, so one is left for production's ticks)")
	f.Float64Var(&rateLimit, "rate-limit", 1000, "commands per second one user may send, all its connections together (bursts of twice that; unauthenticated commands: per connection); 0: no limit")
	f.DurationVar(&janitorEvery, "janitor-every", time.Hour, "how often the janitor retires the snapshot tables no environment's incumbent and no open plan uses (TableRetired; the warehouse drops them); 0: never")
	f.DurationVar(&janitorGrace, "janitor-grace", 24*time.Hour, "retire a table only when its last use ended more than this long ago (at least 1h)")
	f.DurationVar(&retain, "retain", commands.DefaultRetain, "keep a table an environment's incumbent wrote or read at least this long after a promotion or rollback demoted it, so that a rollback within it always finds its tables (at least 1h; default 7 days, SQLMesh's)")
	f.StringVar(&httpAddr, "http", "127.0.0.1:8090", "dashboard, /metrics, /healthz and /readyz address (empty: no HTTP)")
	f.StringVar(&notifier.URL, "notify-url", "", "POST a JSON document to this URL for each promotion, rollback and restatement, each work item given up, and each model becoming late or on time again (docs/events.md, Notifications); sent by the writer, each with an Idempotency-Key")
	f.StringVar(&notifier.Dashboard, "notify-dashboard-url", "", "the dashboard's base URL as the notifications' receivers reach it (a public name, a proxy), for each notification's link (default: the --http address, http://127.0.0.1:8090)")
	f.IntVar(&notifier.Attempts, "notify-attempts", notify.DefaultAttempts, "attempts at a notification before the notifier logs an error and pauses (a minute) before trying it again; none is dropped")
	f.DurationVar(&notifier.Backoff, "notify-backoff", notify.DefaultBackoff, "wait after a notification's first failed attempt, doubling with each, at most 30s")
	f.DurationVar(&notifier.LateEvery, "notify-late-every", notify.DefaultLateEvery, "how often the notifier judges whether each environment's models are late (a model is late when what it has computed ends more than one interval of its unit before what is ready)")
	return cmd
}

func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// storeHint adds what to do to an error that says the store lost events.
func storeHint(err error, dataDir, natsURL string) error {
	if !errors.Is(err, engine.ErrDamaged) {
		return err
	}
	if natsURL != "" {
		return fmt.Errorf("%w\nthe stream on %s lost acknowledged events: restore it from a backup or a healthy replica (`tidemark replay --nats-url` lists what is left)", err, natsURL)
	}
	return fmt.Errorf("%w\nthe store in %s lost acknowledged events: stop, keep a copy of the directory, and restore it from a backup (`tidemark replay --data-dir %s` lists what is left; see docs/security.md)", err, dataDir, dataDir)
}

// whileWriting runs loops each time the member becomes the writer, and stops them
// (waiting for them to return) when it stops being the writer, until ctx
// ends.
func whileWriting(ctx context.Context, eng *cluster.Member, log *slog.Logger, loops ...func(context.Context)) {
	for {
		if err := eng.AwaitWriting(ctx); err != nil {
			return
		}
		log.Info("this engine is the writer: starting the scheduler, the catch-up driver, the janitor, the work publisher and the notifier")
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, loop := range loops {
			wg.Add(1)
			go func() { defer wg.Done(); loop(lctx) }()
		}
		for on := true; on; {
			var changed <-chan struct{}
			on, changed = eng.Writing()
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
		log.Info("this engine is no longer the writer: its loops stopped")
	}
}

// webWorkers is the roster's live workers as the dashboard shows them.
func webWorkers(live []work.Worker, now time.Time) []web.Worker {
	out := make([]web.Worker, len(live))
	for i, w := range live {
		out[i] = web.Worker{Name: w.Name, Kind: w.Kind, User: w.User, Done: w.Done, Failed: w.Failed, InFlight: w.InFlight,
			Started: w.Started, LastSeen: w.LastSeen, Age: max(now.Sub(w.LastSeen), 0)}
	}
	return out
}

// warehouseDSNOr is dsn, or the default DuckDB file in dataDir.
func warehouseDSNOr(dsn, dataDir string) string {
	if dsn == "" {
		return filepath.Join(dataDir, "warehouse.duckdb")
	}
	return dsn
}

// openWarehouse opens the warehouse of --warehouse (nil for "none").
func openWarehouse(ctx context.Context, dsn, dataDir string, opts warehouse.Options) (*warehouse.Warehouse, error) {
	if dsn == "none" {
		return nil, nil
	}
	return warehouse.Open(ctx, warehouseDSNOr(dsn, dataDir), opts)
}
