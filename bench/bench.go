// Package bench measures tidemark against the JetStream it stands on: each
// figure runs tidemark's path and the raw JetStream equivalent in the same
// run, on the same server settings, and reports the ratio against a goal.
// Importers: cmd/tidemark (tidemark bench), integration (the cluster run).
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/transport"
)

// Figure is one measured row.
type Figure struct {
	Name string `json:"name"`
	// Tidemark and Raw are the two measurements in Unit.
	Tidemark float64 `json:"tidemark"`
	Raw      float64 `json:"raw,omitempty"`
	Unit     string  `json:"unit"`
	// Ratio is Tidemark/Raw (or as the goal defines it).
	Ratio float64 `json:"ratio"`
	Goal  string  `json:"goal"`
	Pass  bool    `json:"pass"`
	Note  string  `json:"note,omitempty"`
}

// Options sizes a run.
type Options struct {
	// Quick shrinks every figure to finish in about two minutes.
	Quick bool
	// Progress, when set, is told which figure runs.
	Progress func(name string)
}

type sizes struct {
	commands, latency, durable, replayEvents, candidates, memSnapshots int
	// growth lists the stream sizes command throughput is measured at.
	growth []int
}

func (o Options) sizes() sizes {
	if o.Quick {
		return sizes{commands: 20_000, latency: 2_000, durable: 3_000, replayEvents: 100_000, candidates: 200, memSnapshots: 2_000, growth: []int{10_000, 100_000}}
	}
	return sizes{commands: 200_000, latency: 10_000, durable: 20_000, replayEvents: 1_000_000, candidates: 1_000, memSnapshots: 10_000,
		growth: []int{10_000, 100_000, 1_000_000}}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Run measures every figure.
func Run(ctx context.Context, opts Options) ([]Figure, error) {
	sz := opts.sizes()
	steps := []struct {
		name string
		fn   func(context.Context, sizes) ([]Figure, error)
	}{
		{"command throughput and latency", commandFigures},
		{"durable throughput", durableFigure},
		{"replay and restart", replayFigures},
		{"promotion check", promotionFigure},
		{"memory", memoryFigure},
		{"growth", growthFigure},
		{"cluster", clusterFigures},
	}
	var out []Figure
	for _, s := range steps {
		if opts.Progress != nil {
			opts.Progress(s.name)
		}
		fs, err := s.fn(ctx, sz)
		if err != nil {
			return out, fmt.Errorf("bench: %s: %w", s.name, err)
		}
		out = append(out, fs...)
	}
	return out, nil
}

// instance is an engine with the embedded server it runs on.
type instance struct {
	*engine.Engine
	node *natsnode.Node
}

// open starts an embedded server on dir (fsyncing every append with sync)
// and an engine on it.
func open(ctx context.Context, dir string, sync bool, cfg engine.Config) (*instance, error) {
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: dir, SyncAlways: sync, Name: "tidemark-engine"})
	if err != nil {
		return nil, err
	}
	e, err := engine.Open(ctx, node.Conn(), cfg)
	if err != nil {
		node.Close()
		return nil, err
	}
	return &instance{Engine: e, node: node}, nil
}

// Close closes the engine, then its server.
func (i *instance) Close(ctx context.Context) error {
	err := i.Engine.Close(ctx)
	i.node.Close()
	return err
}

// server is an engine on a fresh temp dir.
func server(ctx context.Context, sync bool) (*instance, func(), error) {
	dir, err := os.MkdirTemp("", "tidemark-bench-*")
	if err != nil {
		return nil, nil, err
	}
	e, err := open(ctx, dir, sync, engine.Config{Logger: quiet(), CheckpointEvery: -1, TrustCommandTime: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return e, func() { e.Close(context.Background()); os.RemoveAll(dir) }, nil
}

// snapshots registers n snapshots of one model (versions v0…).
func snapshots(ctx context.Context, h commands.Handler, n int) error {
	for i := 0; i < n; i++ {
		r := h.Handle(ctx, &commands.RegisterSnapshot{Meta: commands.Meta{ID: fmt.Sprintf("reg-%d", i), At: t0},
			Model: "bench", Version: fmt.Sprintf("v%d", i), Cron: "@hourly", Start: t0})
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

func completion(i, snaps int, id string) *commands.CompleteIntervals {
	h := t0.Add(time.Duration(i/snaps) * time.Hour)
	return &commands.CompleteIntervals{Meta: commands.Meta{ID: id, At: t0.Add(100_000 * time.Hour)}, Model: "bench",
		Version: fmt.Sprintf("v%d", i%snaps), Ranges: []interval.Range{interval.R(h, h.Add(time.Hour))}, RunKind: events.RunScheduled}
}

// benchIDs names the raw side's events. (One source for all: a fresh
// source per event reads crypto/rand each time, which slowed the raw
// publishers down.)
var benchIDs = events.NewIDSource()

// eventBytes is the encoded IntervalsCompleted a completion appends.
func eventBytes(i, snaps int) (string, []byte) {
	c := completion(i, snaps, "")
	id := events.SnapshotID(c.Model, c.Version)
	ev := events.New(benchIDs, c.At, events.IntervalsCompleted{Snapshot: id, Table: id, Ranges: c.Ranges, RunKind: c.RunKind})
	b, _ := events.Encode(ev)
	return ev.Payload.Subject(), b
}

// serveClients starts the command service and n client connections.
func serveClients(e *instance, n int) ([]*transport.Client, func(), error) {
	svc, err := transport.Serve(e.Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		return nil, nil, err
	}
	var conns []*nats.Conn
	var clients []*transport.Client
	for i := 0; i < n; i++ {
		nc, err := nats.Connect("", nats.InProcessServer(e.node.Server()))
		if err != nil {
			return nil, nil, err
		}
		conns = append(conns, nc)
		clients = append(clients, transport.NewClient(nc))
	}
	return clients, func() {
		for _, c := range conns {
			c.Close()
		}
		svc.Stop()
	}, nil
}

// parallel runs fn(i) for i in [0, total) on n goroutines and returns the
// rate per second and the first error.
func parallel(n, total int, fn func(worker, i int) error) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total || firstErr.Load() != nil {
					return
				}
				if err := fn(w, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// throughput sends total completions from the clients concurrently.
func throughput(ctx context.Context, clients []*transport.Client, total, snaps int, prefix string) (float64, error) {
	return parallel(len(clients), total, func(w, i int) error {
		r, err := clients[w].Do(ctx, completion(i, snaps, fmt.Sprintf("%s-%d", prefix, i)))
		if err == nil {
			err = r.Err()
		}
		return err
	})
}

// served is an engine with 1,000 snapshots and 16 command clients.
func served(ctx context.Context, sync bool) (*instance, []*transport.Client, func(), error) {
	e, done, err := server(ctx, sync)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := snapshots(ctx, e, benchSnapshots); err != nil {
		done()
		return nil, nil, nil, err
	}
	cs, stop, err := serveClients(e, benchClients)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return e, cs, func() { stop(); done() }, nil
}

// The command figures' shape: clients over snapshots.
const benchSnapshots, benchClients = 1000, 16

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

func commandFigures(ctx context.Context, sz sizes) ([]Figure, error) {
	const snaps = benchSnapshots
	_, cs, done, err := served(ctx, false)
	if err != nil {
		return nil, err
	}
	defer done()
	tm, err := throughput(ctx, cs, sz.commands, snaps, "tp")
	if err != nil {
		return nil, err
	}
	// Latency: one client, sequential.
	lat := make([]time.Duration, sz.latency)
	for i := range lat {
		s := time.Now()
		r, err := cs[0].Do(ctx, completion(sz.commands+i, snaps, fmt.Sprintf("lat-%d", i)))
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			return nil, err
		}
		lat[i] = time.Since(s)
	}
	raw, doneRaw, err := server(ctx, false)
	if err != nil {
		return nil, err
	}
	defer doneRaw()
	rawTP, err := rawAsync(ctx, raw.JetStream(), sz.commands, snaps)
	if err != nil {
		return nil, err
	}
	// Let the raw server's own projection finish folding what was just
	// published, so it does not compete with the latency run.
	if err := raw.CatchUp(ctx); err != nil {
		return nil, err
	}
	rawLat := make([]time.Duration, sz.latency)
	for i := range rawLat {
		subj, b := eventBytes(sz.commands+i, snaps)
		s := time.Now()
		if _, err := raw.JetStream().Publish(ctx, subj, b); err != nil {
			return nil, err
		}
		rawLat[i] = time.Since(s)
	}
	echo, err := echoRate(raw, sz.commands)
	if err != nil {
		return nil, err
	}
	// A command is a request/reply plus an append: even if deciding and
	// folding cost nothing, its rate is at most 1/(1/echo + 1/raw).
	ceiling := 1 / (1/echo + 1/rawTP)
	p50, p99 := percentile(lat, .5), percentile(lat, .99)
	r50, r99 := percentile(rawLat, .5), percentile(rawLat, .99)
	return []Figure{
		{Name: "command throughput (16 clients, complete_intervals over 1,000 snapshots)", Tidemark: tm, Raw: rawTP, Unit: "ops/s", Ratio: tm / rawTP, Goal: ">= 0.5", Pass: tm/rawTP >= 0.5,
			Note: fmt.Sprintf("transport alone (request/reply echo, 16 clients) %.0f ops/s: a request/reply command path is at most %.2f of raw; tidemark reaches %.0f%% of that", echo, ceiling/rawTP, 100*tm/ceiling)},
		{Name: "command latency p99 (one client)", Tidemark: us(p99), Raw: us(r99), Unit: "µs", Ratio: us(p99) / us(r99), Goal: "<= 3.0", Pass: us(p99)/us(r99) <= 3,
			Note: fmt.Sprintf("p50 %.0f µs vs %.0f µs", us(p50), us(r50))},
	}, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// echoRate is the command transport alone: 16 clients' requests to a micro
// endpoint on e's server that answers each at once with its body.
func echoRate(e *instance, total int) (float64, error) {
	svc, err := micro.AddService(e.Conn(), micro.Config{Name: "tidemark-bench-echo", Version: "1.0.0"})
	if err != nil {
		return 0, err
	}
	defer svc.Stop()
	if err := svc.AddEndpoint("echo", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(r.Data()) }), micro.WithEndpointSubject("bench.echo")); err != nil {
		return 0, err
	}
	if err := e.Conn().Flush(); err != nil {
		return 0, err
	}
	conns := make([]*nats.Conn, benchClients)
	for i := range conns {
		if conns[i], err = nats.Connect("", nats.InProcessServer(e.node.Server())); err != nil {
			return 0, err
		}
		defer conns[i].Close()
	}
	body, err := commands.Encode(completion(0, benchSnapshots, "echo-0"), false)
	if err != nil {
		return 0, err
	}
	return parallel(benchClients, total, func(w, _ int) error {
		_, err := conns[w].Request("bench.echo", body, 10*time.Second)
		return err
	})
}

// replayFigures fills a stream with n events, then times a full rebuild
// against a raw ordered-consumer read, and a restart from a checkpoint
// against a restart that folds everything.
func replayFigures(ctx context.Context, sz sizes) ([]Figure, error) {
	const snaps = 1000
	dir, err := os.MkdirTemp("", "tidemark-bench-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := open(ctx, dir, false, engine.Config{Logger: quiet(), CheckpointEvery: -1, TrustCommandTime: true})
	if err != nil {
		return nil, err
	}
	if err := snapshots(ctx, e, snaps); err != nil {
		e.Close(ctx)
		return nil, err
	}
	if _, err := rawAsync(ctx, e.JetStream(), sz.replayEvents, snaps); err != nil {
		e.Close(ctx)
		return nil, err
	}
	e.Close(ctx)
	e, err = open(ctx, dir, false, engine.Config{Logger: quiet(), CheckpointEvery: -1})
	if err != nil {
		return nil, err
	}
	js := e.JetStream()
	start := time.Now()
	recs, err := e.Reader().Read(ctx, eventlog.ReadOptions{})
	if err != nil {
		e.Close(ctx)
		return nil, err
	}
	st := replay.Fold(recs)
	tmReplay := time.Since(start)
	n := len(recs)
	recs = nil
	start = time.Now()
	if err := rawRead(ctx, js, n); err != nil {
		e.Close(ctx)
		return nil, err
	}
	rawReplay := time.Since(start)
	_ = st
	e.Close(ctx)

	// Restart: full fold, then with a checkpoint (written on close).
	start = time.Now()
	full, err := open(ctx, dir, false, engine.Config{Logger: quiet()})
	if err != nil {
		return nil, err
	}
	fullOpen := time.Since(start)
	full.Close(ctx) // writes the checkpoint
	start = time.Now()
	fromCP, err := open(ctx, dir, false, engine.Config{Logger: quiet()})
	if err != nil {
		return nil, err
	}
	cpOpen := time.Since(start)
	stats := fromCP.Stats()
	fromCP.Close(ctx)
	tmRate := float64(n) / tmReplay.Seconds()
	rawRate := float64(n) / rawReplay.Seconds()
	return []Figure{
		{Name: fmt.Sprintf("replay (%d events, rebuild every projection)", n), Tidemark: tmRate, Raw: rawRate, Unit: "events/s", Ratio: tmRate / rawRate, Goal: ">= 0.5", Pass: tmRate/rawRate >= 0.5},
		{Name: fmt.Sprintf("restart (ready from a checkpoint, %d events)", n), Tidemark: cpOpen.Seconds() * 1000, Raw: fullOpen.Seconds() * 1000, Unit: "ms",
			Ratio: cpOpen.Seconds() / fullOpen.Seconds(), Goal: "<= 0.05", Pass: cpOpen.Seconds()/fullOpen.Seconds() <= 0.05 && stats.Folded == 0,
			Note: fmt.Sprintf("checkpoint at seq %d, %d events folded after it", stats.CheckpointSeq, stats.Folded)},
	}, nil
}

// promotionFigure evaluates a plan of many candidates whose coverage is
// 100 fragments spanning 10 years of hourly intervals, against 1 year.
func promotionFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	measure := func(years int) (time.Duration, time.Duration) {
		st := projections.New()
		plan := events.PlanBuilt{Plan: "p", Env: "prod", Generation: 1, Policy: events.Policy{Version: policy.Version}}
		env := &projections.Env{Name: "prod", Generation: 1, Incumbents: map[string]string{}}
		st.Envs["prod"] = env
		span := time.Duration(years) * 365 * 24 * time.Hour
		step := span / 100
		var cov interval.Set
		for f := 0; f < 100; f++ {
			a := t0.Add(time.Duration(f) * step).Truncate(time.Hour)
			cov = cov.Add(interval.R(a, a.Add(step-time.Hour).Truncate(time.Hour)))
		}
		sched := interval.MustSchedule("@hourly", "", false)
		for c := 0; c < sz.candidates; c++ {
			inc, cand := fmt.Sprintf("m%d@v1", c), fmt.Sprintf("m%d@v2", c)
			for _, id := range []string{inc, cand} {
				m, v, _ := events.ParseSnapshotID(id)
				st.Snapshots[id] = &projections.Snapshot{Schedule: sched, SnapshotRegistered: events.SnapshotRegistered{Snapshot: id, Model: m, Version: v,
					Cron: sched.Cron(), Unit: sched.Unit(), Start: t0, Kind: events.Incremental, Table: id}}
				st.Coverage[id] = cov
			}
			env.Incumbents[fmt.Sprintf("m%d", c)] = inc
			plan.Candidates = append(plan.Candidates, events.Candidate{Model: fmt.Sprintf("m%d", c), Snapshot: cand, Table: cand, Upstream: []string{},
				Incumbent: inc, IncumbentFrontier: cov.Frontier(), IncumbentCron: sched.Cron(), IncumbentUnit: sched.Unit()})
		}
		var ds []time.Duration
		for i := 0; i < 30; i++ {
			s := time.Now()
			policy.Evaluate(st, plan)
			ds = append(ds, time.Since(s))
		}
		return percentile(ds, .5), percentile(ds, .99)
	}
	ten50, ten99 := measure(10)
	one50, _ := measure(1)
	r := float64(ten50) / float64(one50)
	return []Figure{{Name: fmt.Sprintf("promotion check (%d candidates, 10 years hourly in 100 fragments)", sz.candidates), Tidemark: us(ten50), Raw: us(one50), Unit: "µs",
		Ratio: r, Goal: "<= 1.5 vs 1 year", Pass: r <= 1.5, Note: fmt.Sprintf("p99 %.0f µs", us(ten99))}}, nil
}

// memoryFigure measures the heap the projections take for many snapshots
// with a year of hourly coverage each.
func memoryFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st := projections.New()
	ids := events.NewIDSource()
	seq := uint64(0)
	for i := 0; i < sz.memSnapshots; i++ {
		id := fmt.Sprintf("m%d@v1", i)
		m, v, _ := events.ParseSnapshotID(id)
		seq++
		_ = projections.Apply(st, seq, events.New(ids, t0, events.SnapshotRegistered{Snapshot: id, Model: m, Version: v, Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.Incremental, Table: id}))
		for d := 0; d < 365; d += 30 {
			seq++
			a := t0.Add(time.Duration(d) * 24 * time.Hour)
			_ = projections.Apply(st, seq, events.New(ids, t0, events.IntervalsCompleted{Snapshot: id, Table: id, Ranges: []interval.Range{interval.R(a, a.Add(30*24*time.Hour))}, RunKind: events.RunBackfill}))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	runtime.KeepAlive(st)
	scaled := heap / float64(sz.memSnapshots) * 10_000
	return []Figure{{Name: fmt.Sprintf("memory (%d snapshots × 1 year hourly)", sz.memSnapshots), Tidemark: heap / (1 << 20), Unit: "MiB",
		Ratio: scaled / (1 << 20), Goal: "<= 64 MiB at 10,000", Pass: scaled <= 64<<20, Note: fmt.Sprintf("%.0f bytes per snapshot; ratio column: MiB scaled to 10,000", heap/float64(sz.memSnapshots))}}, nil
}

// growthFigure measures command throughput with the stream already holding
// 10k, 100k (and 1M) events: it must not fall by more than 20 %.
func growthFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	if len(sz.growth) < 2 {
		return nil, nil
	}
	rates := make([]float64, len(sz.growth))
	for gi, n := range sz.growth {
		e, cs, done, err := served(ctx, false)
		if err != nil {
			return nil, err
		}
		if _, err := rawAsync(ctx, e.JetStream(), n, benchSnapshots); err != nil {
			done()
			return nil, err
		}
		if err := e.CatchUp(ctx); err != nil {
			done()
			return nil, err
		}
		rates[gi], err = throughput(ctx, cs, sz.commands/2, benchSnapshots, fmt.Sprintf("g%d", gi))
		done()
		if err != nil {
			return nil, err
		}
	}
	last := rates[len(rates)-1] / rates[0]
	parts := make([]string, len(sz.growth))
	for i, n := range sz.growth {
		parts[i] = fmt.Sprintf("%dk events: %.0f ops/s", n/1000, rates[i])
	}
	// The slope: the change of throughput per tenfold growth of the stream.
	decades := math.Log10(float64(sz.growth[len(sz.growth)-1]) / float64(sz.growth[0]))
	slope := math.Pow(last, 1/decades) - 1
	note := fmt.Sprintf("slope %+.1f %% per 10× events; %s", 100*slope, strings.Join(parts, "; "))
	return []Figure{{Name: fmt.Sprintf("growth (command throughput, %dk → %dk events in the stream)", sz.growth[0]/1000, sz.growth[len(sz.growth)-1]/1000),
		Tidemark: rates[len(rates)-1], Raw: rates[0], Unit: "ops/s", Ratio: last, Goal: ">= 0.8", Pass: last >= 0.8, Note: note}}, nil
}
