package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/notify"
	"github.com/tidemark/tidemark/server"
	"github.com/tidemark/tidemark/work"
)

// serveFlags are serve's flags: server.Config's fields, and the few that
// only shape it (the log format, the derived NATS settings).
type serveFlags struct {
	cfg                                       server.Config
	logFormat, listen                         string
	noSync, noCoalesce                        bool
	clusterListen                             string
	authFile, user, password, tlsCert, tlsKey string
}

// config is the server.Config the flags describe (the logger: an error
// names --log-format).
func (sf *serveFlags) config() (server.Config, error) {
	cfg := sf.cfg
	log, err := newLogger(sf.logFormat)
	if err != nil {
		return cfg, err
	}
	cfg.Logger = log
	n := &cfg.Node
	n.SyncAlways, n.ClusterListen, n.Name = !sf.noSync, sf.clusterListen, "tidemark-engine"
	n.AuthFile, n.User, n.Password, n.TLSCert, n.TLSKey = sf.authFile, sf.user, sf.password, sf.tlsCert, sf.tlsKey
	if n.Password == "" {
		n.Password = os.Getenv("TIDEMARK_PASSWORD")
	}
	if n.ClusterName != "" && n.ServerName == "" {
		n.ServerName = "tidemark-" + strings.ReplaceAll(sf.clusterListen, ":", "-")
	}
	if n.NatsURL == "" {
		n.Listen = sf.listen
	}
	cfg.Coalesce = !sf.noCoalesce
	cfg.Build = webBuild()
	return cfg, nil
}

func newServeCmd() *cobra.Command {
	sf := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine: JetStream (embedded or external), the command service and the scheduler",
		Long: "serve runs an embedded NATS server with JetStream (or connects to --nats-url), the\n" +
			"tidemark command service (NATS micro service \"tidemark\"), the live projections and the\n" +
			"scheduler on the wall clock, until interrupted. Every append is fsynced before it is\n" +
			"acknowledged unless --no-sync is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := sf.config()
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			return serve(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	bindServeFlags(cmd.Flags(), sf)
	return cmd
}

// serve opens a server with cfg, says where it serves, runs it until ctx
// ends, and closes it (the test harness, startServe, does the same).
func serve(ctx context.Context, out io.Writer, cfg server.Config) error {
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return &exitError{kind: usage, err: storeHint(err, cfg)}
	}
	fmt.Fprintf(out, "tidemark serving on %s (Ctrl-C to stop)\n", srv.NATSURL())
	if d := srv.DashboardURL(); d != "" {
		fmt.Fprintf(out, "dashboard on %s (metrics %s/metrics)\n", d, d)
	}
	failed := srv.Run(ctx)
	if err := srv.Close(context.WithoutCancel(ctx)); err != nil && failed == nil {
		return err
	}
	if failed != nil {
		return &exitError{kind: usage, err: storeHint(failed, cfg)}
	}
	return nil
}

// bindServeFlags adds serve's flags to f, bound to sf.
func bindServeFlags(f *pflag.FlagSet, sf *serveFlags) {
	c := &sf.cfg
	f.StringVar(&c.Node.DataDir, "data-dir", "tidemark-data", "directory of the embedded server's JetStream store")
	f.StringVar(&c.Node.NatsURL, "nats-url", "", "connect to this NATS server instead of embedding one")
	f.StringVar(&sf.listen, "listen", "127.0.0.1:4222", "client address of the embedded NATS server")
	f.BoolVar(&sf.noSync, "no-sync", false, "do not fsync every append (faster; risks losing acknowledged events on a machine crash)")
	f.BoolVar(&sf.noCoalesce, "no-coalesce", false, "store each event as its own message on its own subject instead of a group of concurrent completions as one group message (one store and, under fsync, one fsync per event: slower; for consumers that filter the stream by subject on the server)")
	f.StringVar(&c.Warehouse, "warehouse", "", "where SQL models are computed and environments' views live: a DuckDB file, with --builtin-worker only (its default: DATA-DIR/warehouse.duckdb; one process owns it), postgres://… for a Postgres shared with tidemark worker --warehouse processes (serve then swaps the views and answers query and verify), or none")
	warehouseFlags(f, &c.WarehouseOptions, true)
	f.BoolVar(&c.BuiltinWorker, "builtin-worker", false, "run all work (backfill, scheduled, catch-up, repair) in-process, recording it as done at once, instead of publishing it to tidemark worker processes (demos and tests)")
	f.IntVar(&c.Replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	f.StringVar(&sf.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&sf.authFile, "auth", "", "users and permissions for the embedded server (a nats-server config, see docs/auth.conf)")
	f.StringVar(&sf.user, "user", "", "the engine's own user with --auth (an admin)")
	f.StringVar(&sf.password, "password", "", "the engine's password (default $TIDEMARK_PASSWORD)")
	f.StringVar(&sf.tlsCert, "tls-cert", "", "PEM certificate: require TLS from network clients")
	f.StringVar(&sf.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&c.Node.ClusterName, "cluster", "", "run the embedded server as a member of this JetStream cluster")
	f.StringVar(&sf.clusterListen, "cluster-listen", "", "cluster (route) address of the embedded server, HOST:PORT")
	f.StringSliceVar(&c.Node.Routes, "routes", nil, "routes to the other cluster members, nats://HOST:PORT (comma-separated)")
	f.StringVar(&c.Node.ServerName, "server-name", "", "embedded server name, unique in a cluster (default from --cluster-listen)")
	f.DurationVar(&c.WorkAckWait, "work-ack-wait", work.DefaultAckWait, "redeliver a work item when its worker is silent this long (the work consumer the engine provisions; workers heartbeat every third of it)")
	f.IntVar(&c.WorkMaxAttempts, "work-max-attempts", work.DefaultMaxDeliver, "attempts at a work item before it is given up, its last failure recorded final (the work consumer's max deliver; the built-in worker's attempts at an item whose model fails, with a backoff from 1s, doubling, at most 10s)")
	f.IntVar(&c.WorkConcurrency, "work-concurrency", work.DefaultConcurrency, "work items the built-in worker computes at once (items on tables another item writes wait for it; scheduled and repair work first, and plan work on at most this many minus one, so one is left for production's ticks)")
	f.Float64Var(&c.RateLimit, "rate-limit", 1000, "commands per second one user may send, all its connections together (bursts of twice that; unauthenticated commands: per connection); 0: no limit")
	f.DurationVar(&c.JanitorEvery, "janitor-every", time.Hour, "how often the janitor retires the snapshot tables no environment's incumbent and no open plan uses (TableRetired; the warehouse drops them); 0: never")
	f.DurationVar(&c.JanitorGrace, "janitor-grace", 24*time.Hour, "retire a table only when its last use ended more than this long ago (at least 1h)")
	f.DurationVar(&c.Retain, "retain", commands.DefaultRetain, "keep a table an environment's incumbent wrote or read at least this long after a promotion or rollback demoted it, so that a rollback within it always finds its tables (at least 1h; default 7 days, SQLMesh's)")
	f.StringVar(&c.HTTP, "http", "127.0.0.1:8090", "dashboard, /metrics, /healthz and /readyz address (empty: no HTTP)")
	n := &c.Notify
	f.StringVar(&n.URL, "notify-url", "", "POST a JSON document to this URL for each promotion, rollback and restatement, each work item given up, and each model becoming late or on time again (docs/events.md, Notifications); sent by the writer, each with an Idempotency-Key")
	f.StringVar(&n.Dashboard, "notify-dashboard-url", "", "the dashboard's base URL as the notifications' receivers reach it (a public name, a proxy), for each notification's link (default: the --http address, http://127.0.0.1:8090)")
	f.IntVar(&n.Attempts, "notify-attempts", notify.DefaultAttempts, "attempts at a notification before the notifier logs an error and pauses (a minute) before trying it again; none is dropped")
	f.DurationVar(&n.Backoff, "notify-backoff", notify.DefaultBackoff, "wait after a notification's first failed attempt, doubling with each, at most 30s")
	f.DurationVar(&n.LateEvery, "notify-late-every", notify.DefaultLateEvery, "how often the notifier judges whether each environment's models are late (a model is late when what it has computed ends more than one interval of its unit before what is ready)")
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
func storeHint(err error, cfg server.Config) error {
	if !errors.Is(err, engine.ErrDamaged) {
		return err
	}
	if u := cfg.Node.NatsURL; u != "" {
		return fmt.Errorf("%w\nthe stream on %s lost acknowledged events: restore it from a backup or a healthy replica (`tidemark replay --nats-url` lists what is left)", err, u)
	}
	d := cfg.Node.DataDir
	return fmt.Errorf("%w\nthe store in %s lost acknowledged events: stop, keep a copy of the directory, and restore it from a backup (`tidemark replay --data-dir %s` lists what is left; see docs/security.md)", err, d, d)
}
