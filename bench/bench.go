// Package bench measures tidemark against the JetStream it stands on: each
// figure runs tidemark's path and the raw JetStream equivalent in the same
// run, on the same server settings, and reports the ratio against a goal.
// The data plane's row (tick to served, served.go) runs serve's path on a
// DuckDB warehouse against its goal's bound.
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
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
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
	// Tidemark is tidemark's measurement in Unit; Limit is what the row
	// compares it with, measured in the same run with the same client
	// concurrency (the transport limit, a raw JetStream read, the goal's
	// bound...); Raw, when set, is the raw JetStream equivalent (for most
	// rows the limit itself).
	Tidemark float64 `json:"tidemark"`
	Limit    float64 `json:"limit"`
	Raw      float64 `json:"raw,omitempty"`
	Unit     string  `json:"unit"`
	// Ratio is Tidemark/Limit (or as the goal defines it).
	Ratio float64 `json:"ratio"`
	Goal  string  `json:"goal"`
	Pass  bool    `json:"pass"`
	Note  string  `json:"note,omitempty"`
	// Scale is the row measured again at ten times its size (nil: not
	// measured in this run).
	Scale *Scale `json:"scale,omitempty"`
}

// MaxSlope is how much dearer per unit of work a row may get per tenfold
// size and still count as flat (Scale.Flat).
const MaxSlope = 0.25

// Scale is a row at a larger size: how tidemark's cost grows.
type Scale struct {
	// Size and ScaledSize are what the row counts (snapshots, events,
	// candidates) at its own size and at the larger one.
	Size       int `json:"size"`
	ScaledSize int `json:"scaled_size"`
	// ScaledTidemark and ScaledLimit are the row's measurements at
	// ScaledSize, in the row's Unit.
	ScaledTidemark float64 `json:"scaled_tidemark"`
	ScaledLimit    float64 `json:"scaled_limit,omitempty"`
	// Slope is the change of tidemark's cost per unit of work (a command,
	// an event, a candidate, a snapshot; a restart as a whole) per tenfold
	// size: +0.10 is 10 % dearer at ten times the size, 0 is flat.
	Slope float64 `json:"slope"`
	// Flat is Slope <= MaxSlope.
	Flat bool `json:"flat"`
}

// scaled builds a Scale from the costs per unit of work at both sizes.
func scaled(size, big int, tm, bigTm, bigLimit, cost, bigCost float64) *Scale {
	decades := math.Log10(float64(big) / float64(size))
	slope := math.Pow(bigCost/cost, 1/decades) - 1
	return &Scale{Size: size, ScaledSize: big, ScaledTidemark: bigTm, ScaledLimit: bigLimit, Slope: slope, Flat: slope <= MaxSlope}
}

// Options sizes a run.
type Options struct {
	// Quick shrinks every figure to finish in about two minutes.
	Quick bool
	// Only names the groups of rows to measure (Groups); none: all.
	Only []string
	// Progress, when set, is told which figure runs.
	Progress func(name string)
}

type sizes struct {
	commands, latency, durable, replayEvents, candidates, memSnapshots int
	// growth lists the stream sizes command throughput is measured at.
	growth []int
	// tenfold measures the command, promotion and memory rows again at
	// ten times their size; scaledReplay is the replay and restart rows'
	// larger size (0: not measured).
	tenfold      bool
	scaledReplay int
	// ticks is the scheduler ticks of the tick-to-served row.
	ticks int
	// backfillHours is the backfill rows' size (hourly intervals), measured
	// best of backfillRounds.
	backfillHours, backfillRounds int
	// backfillScale measures the backfill rows again at 10× (full runs
	// only: it takes minutes).
	backfillScale bool
	// diffHours is the diff rows' size (hourly intervals of 1,000 rows a
	// side), measured best of diffRounds.
	diffHours, diffRounds int
}

func (o Options) sizes() sizes {
	if o.Quick {
		return sizes{commands: 20_000, latency: 2_000, durable: 3_000, replayEvents: 100_000, candidates: 200, memSnapshots: 2_000, growth: []int{10_000, 100_000},
			tenfold: true, ticks: 5, backfillHours: 168 * 2, backfillRounds: 1, diffHours: 168 * 2, diffRounds: 1}
	}
	// Replay at 10M events: the rebuild folds as it reads (it holds the
	// state, not the stream), and 10M events take about 3 GB of disk.
	return sizes{commands: 200_000, latency: 10_000, durable: 20_000, replayEvents: 1_000_000, candidates: 1_000, memSnapshots: 10_000,
		growth: []int{10_000, 100_000, 1_000_000}, tenfold: true, scaledReplay: 10_000_000, ticks: 50, backfillHours: 8_760, backfillRounds: 3, backfillScale: true, diffHours: 8_760, diffRounds: 3}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// groups are the groups of rows Run measures, in order.
var groups = []struct {
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
	{"tick to served", tickFigure},
	{"backfill", backfillFigures},
	{"diff", diffFigures},
}

// Groups names the groups of rows, in the order Run measures them
// (Options.Only).
func Groups() []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = g.name
	}
	return out
}

// Run measures every figure (of the groups opts.Only names, if any).
func Run(ctx context.Context, opts Options) ([]Figure, error) {
	sz := opts.sizes()
	for _, name := range opts.Only {
		if !slices.Contains(Groups(), name) {
			return nil, fmt.Errorf("bench: no group of rows %q (groups: %s)", name, strings.Join(Groups(), ", "))
		}
	}
	var out []Figure
	for _, s := range groups {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, s.name) {
			continue
		}
		if opts.Progress != nil {
			opts.Progress(s.name)
		}
		fs, err := s.fn(ctx, sz)
		if err != nil {
			return out, fmt.Errorf("bench: %s: %w", s.name, err)
		}
		for i := range fs {
			if fs[i].Limit == 0 {
				fs[i].Limit = fs[i].Raw // rows whose limit is the raw figure
			}
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
	e, err := open(ctx, dir, sync, engine.Config{Logger: quiet(), CheckpointEvery: -1, TrustCommandTime: true, Coalesce: true})
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
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
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
	return throughputFrom(ctx, clients, 0, total, snaps, prefix)
}

// throughputFrom sends the completions [from, from+n) from the clients
// concurrently, each client awaiting its reply.
func throughputFrom(ctx context.Context, clients []*transport.Client, from, n, snaps int, prefix string) (float64, error) {
	return parallel(len(clients), n, func(w, i int) error {
		i += from
		r, err := clients[w].Do(ctx, completion(i, snaps, fmt.Sprintf("%s-%d", prefix, i)))
		if err == nil {
			err = r.Err()
		}
		return err
	})
}

// served is an engine with 1,000 snapshots and 16 command clients.
func served(ctx context.Context, sync bool) (*instance, []*transport.Client, func(), error) {
	return servedWith(ctx, sync, benchSnapshots)
}

// servedWith is served with snaps snapshots.
func servedWith(ctx context.Context, sync bool, snaps int) (*instance, []*transport.Client, func(), error) {
	e, done, err := server(ctx, sync)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := snapshots(ctx, e, snaps); err != nil {
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

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// replayFigures fills a stream with n events, then times a full rebuild
// against a raw ordered-consumer read, and a restart from a checkpoint
// against a restart that folds everything.
func replayFigures(ctx context.Context, sz sizes) ([]Figure, error) {
	figs, err := replayAt(ctx, sz.replayEvents)
	if err != nil || sz.scaledReplay == 0 {
		return figs, err
	}
	big, err := replayAt(ctx, sz.scaledReplay)
	if err != nil {
		return nil, err
	}
	// Cost per event replayed; a restart from a checkpoint as a whole.
	rp, bigRp := figs[0], big[0]
	figs[0].Scale = scaled(sz.replayEvents, sz.scaledReplay, rp.Tidemark, bigRp.Tidemark, bigRp.Limit, 1/rp.Tidemark, 1/bigRp.Tidemark)
	rs, bigRs := figs[1], big[1]
	figs[1].Scale = scaled(sz.replayEvents, sz.scaledReplay, rs.Tidemark, bigRs.Tidemark, bigRs.Limit, rs.Tidemark, bigRs.Tidemark)
	if !bigRp.Pass || !bigRs.Pass {
		figs[0].Note += fmt.Sprintf("; at %d events: replay ratio %.3f, restart ratio %.3f", sz.scaledReplay, bigRp.Ratio, bigRs.Ratio)
	}
	return figs, nil
}

// replayAt is the replay and restart rows with n events in the stream.
func replayAt(ctx context.Context, n int) ([]Figure, error) {
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
	if _, err := rawAsync(ctx, e.Log().JetStream(), n, snaps); err != nil {
		e.Close(ctx)
		return nil, err
	}
	e.Close(ctx)
	e, err = open(ctx, dir, false, engine.Config{Logger: quiet(), CheckpointEvery: -1})
	if err != nil {
		return nil, err
	}
	js := e.Log().JetStream()
	start := time.Now()
	// A rebuild folds as it reads (replay.Folder): it holds the state,
	// not the stream.
	st, fold := replay.Folder()
	n = 0
	if _, err := e.Log().Reader().Read(ctx, eventlog.ReadOptions{Each: func(r events.Record) { n++; fold(r) }}); err != nil {
		e.Close(ctx)
		return nil, err
	}
	tmReplay := time.Since(start)
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
		{Name: fmt.Sprintf("replay (%d events, rebuild every projection)", n), Tidemark: tmRate, Limit: rawRate, Raw: rawRate, Unit: "events/s", Ratio: tmRate / rawRate, Goal: ">= 0.5", Pass: tmRate/rawRate >= 0.5},
		{Name: fmt.Sprintf("restart (ready from a checkpoint, %d events)", n), Tidemark: cpOpen.Seconds() * 1000, Limit: fullOpen.Seconds() * 1000, Raw: fullOpen.Seconds() * 1000, Unit: "ms",
			Ratio: cpOpen.Seconds() / fullOpen.Seconds(), Goal: "<= 0.05", Pass: cpOpen.Seconds()/fullOpen.Seconds() <= 0.05 && stats.Folded == 0,
			Note: fmt.Sprintf("checkpoint at seq %d, %d events folded after it", stats.CheckpointSeq, stats.Folded)},
	}, nil
}

// promotionFigure evaluates a plan of many candidates whose coverage is
// 100 fragments spanning 10 years of hourly intervals, against 1 year.
// promotionPlan is a state and a plan of candidates whose coverage is
// 100 fragments spanning years of hourly intervals.
func promotionPlan(years, candidates int) (*projections.State, events.PlanBuilt) {
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
	for c := 0; c < candidates; c++ {
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
	return st, plan
}

func promotionFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	measure := func(years, candidates int) (time.Duration, time.Duration) {
		st, plan := promotionPlan(years, candidates)
		var ds []time.Duration
		runs := 30
		if candidates > 1000 {
			runs = 10 // each takes a tenth of a second or more
		}
		for i := 0; i < runs; i++ {
			s := time.Now()
			policy.Evaluate(st, plan)
			ds = append(ds, time.Since(s))
		}
		return percentile(ds, .5), percentile(ds, .99)
	}
	ten50, ten99 := measure(10, sz.candidates)
	one50, _ := measure(1, sz.candidates)
	r := float64(ten50) / float64(one50)
	f := Figure{Name: fmt.Sprintf("promotion check (%d candidates, 10 years hourly in 100 fragments)", sz.candidates), Tidemark: us(ten50), Limit: us(one50), Raw: us(one50), Unit: "µs",
		Ratio: r, Goal: "<= 1.5 vs 1 year", Pass: r <= 1.5, Note: fmt.Sprintf("p99 %.0f µs", us(ten99))}
	if sz.tenfold {
		// Cost per candidate.
		n := 10 * sz.candidates
		big50, _ := measure(10, n)
		bigOne50, _ := measure(1, n)
		f.Scale = scaled(sz.candidates, n, us(ten50), us(big50), us(bigOne50), us(ten50)/float64(sz.candidates), us(big50)/float64(n))
	}
	return []Figure{f}, nil
}

// memoryFigure measures the heap the projections take for many snapshots
// with a year of hourly coverage each.
func memoryFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	heap := memoryAt(sz.memSnapshots)
	scaled10k := heap / float64(sz.memSnapshots) * 10_000
	f := Figure{Name: fmt.Sprintf("memory (%d snapshots × 1 year hourly)", sz.memSnapshots), Tidemark: heap / (1 << 20), Limit: 64, Unit: "MiB",
		Ratio: scaled10k / (1 << 20), Goal: "<= 64 MiB at 10,000", Pass: scaled10k <= 64<<20, Note: fmt.Sprintf("%.0f bytes per snapshot; ratio column: MiB scaled to 10,000", heap/float64(sz.memSnapshots))}
	if sz.tenfold {
		// Bytes per snapshot.
		n := 10 * sz.memSnapshots
		big := memoryAt(n)
		f.Scale = scaled(sz.memSnapshots, n, heap/(1<<20), big/(1<<20), 0, heap/float64(sz.memSnapshots), big/float64(n))
	}
	return []Figure{f}, nil
}

// memoryAt is the heap, in bytes, the projections take for n snapshots.
func memoryAt(n int) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st := projections.New()
	ids := events.NewIDSource()
	seq := uint64(0)
	for i := 0; i < n; i++ {
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
	return heap
}

// growthFigure measures command throughput with the stream already holding
// 10k, 100k (and 1M) events: it must not fall by more than 20 %. Every
// size has an engine of its own, all filled first, then measured in
// alternating rounds (as the command row's two sides are), so that a
// drift of the machine's speed falls on every size alike.
func growthFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	if len(sz.growth) < 2 {
		return nil, nil
	}
	clients := make([][]*transport.Client, len(sz.growth))
	for gi, n := range sz.growth {
		e, cs, done, err := served(ctx, false)
		if err != nil {
			return nil, err
		}
		defer done()
		if _, err := rawAsync(ctx, e.Log().JetStream(), n, benchSnapshots); err != nil {
			return nil, err
		}
		if err := e.CatchUp(ctx); err != nil {
			return nil, err
		}
		clients[gi] = cs
	}
	const rounds = 4
	per := max(sz.commands/2/rounds, 1)
	spent := make([]float64, len(sz.growth)) // seconds
	for r := 0; r < rounds; r++ {
		for k := range clients {
			gi := (k + r) % len(clients) // each size leads a round in turn
			rate, err := throughputFrom(ctx, clients[gi], r*per, per, benchSnapshots, fmt.Sprintf("g%d", gi))
			if err != nil {
				return nil, err
			}
			spent[gi] += float64(per) / rate
		}
	}
	rates := make([]float64, len(sz.growth))
	for gi := range rates {
		rates[gi] = float64(per*rounds) / spent[gi]
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
	first, end := sz.growth[0], sz.growth[len(sz.growth)-1]
	return []Figure{{Name: fmt.Sprintf("growth (command throughput, %dk → %dk events in the stream)", first/1000, end/1000),
		Tidemark: rates[len(rates)-1], Limit: rates[0], Raw: rates[0], Unit: "ops/s", Ratio: last, Goal: ">= 0.8", Pass: last >= 0.8, Note: note,
		Scale: scaled(first, end, rates[0], rates[len(rates)-1], 0, 1/rates[0], 1/rates[len(rates)-1])}}, nil
}
