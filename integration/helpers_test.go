// Package integration holds tests that start real embedded JetStream
// servers (on loopback, random ports, temp store dirs).
package integration

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/scheduler"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

func rng(a, b int) interval.Range { return interval.R(at(a), at(b)) }

func quiet() *slog.Logger { return jstest.Quiet() }

// open opens an engine on a simulated clock: commands carry their time
// (meta(now)); on node, or a new jstest.Node. openStrict (integrity
// tests) opens one as serve does.
func open(t *testing.T, cfg engine.Config, node ...*natsnode.Node) *engine.Engine {
	t.Helper()
	cfg.TrustCommandTime = true
	return jstest.Engine(t, cfg, node...)
}

// ticker is a scheduler on e's parts (for its Tick).
func ticker(e *engine.Engine) *scheduler.Scheduler {
	return &scheduler.Scheduler{Handler: e, Proj: e.Projection(), Clock: e.Now, Logger: quiet()}
}

// catchUps is a catch-up driver on e's parts.
func catchUps(e *engine.Engine) *scheduler.CatchUps {
	return &scheduler.CatchUps{Handler: e, Proj: e.Projection(), Clock: e.Now, Logger: quiet()}
}

// authNode is a node with docs/auth.conf whose connection is the admin's
// (as serve runs it); dir is its data dir (empty: a new temp dir).
func authNode(t *testing.T, dir string) *natsnode.Node {
	t.Helper()
	return jstest.Node(t, authConfig(dir))
}

// nodeOn is a node whose store is in dir.
func nodeOn(t *testing.T, dir string) *natsnode.Node {
	t.Helper()
	return jstest.Node(t, natsnode.Config{DataDir: dir})
}

// dial is a node connected to the server at url.
func dial(t *testing.T, url string) *natsnode.Node {
	t.Helper()
	return jstest.Node(t, natsnode.Config{NatsURL: url})
}

func authConfig(dir string) natsnode.Config {
	return natsnode.Config{DataDir: dir, AuthFile: "../docs/auth.conf", User: "admin", Password: "admin-change-me"}
}

func must(t *testing.T, r commands.Reply) commands.Reply {
	t.Helper()
	if err := r.Err(); err != nil {
		t.Fatalf("command rejected: %v", err)
	}
	return r
}

func stateJSON(t *testing.T, e *engine.Engine) string {
	t.Helper()
	var b []byte
	var err error
	e.Projection().Read(func(st *projections.State) { b, err = json.Marshal(st) })
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastSeq(t *testing.T, e *engine.Engine) uint64 {
	t.Helper()
	s, err := e.Log().Reader().LastSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deploy registers model@version, plans, backfills, promotes and finalizes
// it into env at clock now, through h.
func deploy(t *testing.T, h commands.Handler, env, plan, version string, now time.Time) commands.Reply {
	t.Helper()
	ctx := t.Context()
	must(t, h.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(now), Model: "events", Version: version, Cron: "@hourly", Start: t0}))
	pr := must(t, h.Handle(ctx, &commands.BuildPlan{Meta: meta(now), Plan: plan, Env: env, Versions: map[string]string{"events": version}}))
	for _, c := range pr.Plan.Candidates {
		if len(c.Backfill) > 0 {
			must(t, h.Handle(ctx, &commands.CompleteIntervals{Meta: meta(now), Model: c.Model, Version: version, Ranges: c.Backfill, RunKind: "backfill"}))
		}
	}
	return must(t, h.Handle(ctx, &commands.Promote{Meta: meta(now), Plan: plan}))
}

func meta(now time.Time) commands.Meta {
	return commands.Meta{ID: commands.NewID(), At: now, Actor: "test"}
}

// connect opens another connection to the server e runs on (in-process
// when e's is).
func connect(t *testing.T, e *engine.Engine) *nats.Conn {
	t.Helper()
	// An engine dialed over TCP (replicas' second and later engines)
	// has no in-process server: connect to the URL it is connected to.
	url, opts := e.Log().JetStream().Conn().ConnectedUrl(), []nats.Option(nil)
	if srv := e.Log().JetStream().Conn().Opts.InProcessServer; srv != nil {
		url, opts = "", []nats.Option{nats.InProcessServer(srv)}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
