package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/cluster"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
)

// The cluster experiment: three embedded members on loopback with an R3
// stream, one writer, every member serving commands. Completions arrive at
// a steady rate through all three members while promotions are decided;
// after each acknowledgement another member is asked about what the client
// was told exists; halfway, the writer's member is stopped. The
// integration test (integration/onewriter_test.go) runs it small and
// checks what must always hold; `tidemark bench` runs it at the goal's
// rate and reports the timings.

// ClusterOptions sizes a cluster run.
type ClusterOptions struct {
	// Rate is the completions per second offered, spread over the
	// members (paced; a sender that falls behind sends at once).
	Rate int
	// Duration is how long completions are offered.
	Duration time.Duration
	// Senders is how many clients send completions (default 16).
	Senders int
	// Promotions are decided during the load, evenly spaced.
	Promotions int
	// Failover stops the writer's member halfway through the load.
	Failover bool
	// Crash makes that stop a crash: the member's server shuts down under
	// its engine, which never gives the lease up, so the others take it
	// only once its TTL has passed.
	Crash bool
	// Logger, when set, receives the members' logs.
	Logger *slog.Logger
}

// ClusterResult is what a cluster run measured and found.
type ClusterResult struct {
	// Offered and Acked count completions; Rate is Acked per second of
	// load.
	Offered, Acked int
	Rate           float64
	// Decided counts promotions that got a decision (accepted or
	// rejected); Undecided names those that did not, with why.
	Decided   int
	Undecided []string
	// DecisionP50 and DecisionP99 are the promotions' latencies, from
	// the first send to the decision (retries included).
	DecisionP50, DecisionP99 time.Duration
	// ReadChecks counts reads from another member after an
	// acknowledgement; ReadMisses names those that said not_found.
	ReadChecks int
	ReadMisses []string
	// Failover is the time from stopping the writer's member until
	// another member is the writer and has acknowledged a command;
	// OldWriter and NewWriter name them.
	Failover             time.Duration
	OldWriter, NewWriter string
	// Lost names acknowledged commands the stream does not hold exactly
	// once.
	Lost []string
	// Events is the stream's length at the end.
	Events int
}

// clusterMember is one member: embedded server, engine, command service.
type clusterMember struct {
	name    string
	nodeCfg natsnode.Config
	cfg     engine.Config
	node    *natsnode.Node
	e       *engine.Engine
	m       *cluster.Member
	svc     *cluster.Service
	dead    bool // crashed: not counted as the writer any more
}

func (m *clusterMember) start(ctx context.Context) error {
	node, err := natsnode.Start(ctx, m.nodeCfg)
	if err != nil {
		return err
	}
	e, err := engine.Open(ctx, node.Conn(), m.cfg)
	if err != nil {
		node.Close()
		return err
	}
	member, err := cluster.Join(ctx, cluster.Config{Handler: e, Log: e.Log(), Proj: e.Projection(), CatchUp: e.CatchUp, Node: m.name, Logger: m.cfg.Logger})
	if err != nil {
		e.Close(context.Background())
		node.Close()
		return err
	}
	svc, err := member.Serve(e.Log().JetStream().Conn(), transport.ServiceConfig{Logger: m.cfg.Logger})
	if err != nil {
		member.Leave(context.Background())
		e.Close(context.Background())
		node.Close()
		return err
	}
	m.node, m.e, m.m, m.svc = node, e, member, svc
	return nil
}

func (m *clusterMember) stop() {
	if m.e == nil {
		return
	}
	_ = m.svc.Stop()
	m.m.Leave(context.Background())
	m.e.Close(context.Background())
	m.node.Close()
	m.node, m.e, m.m, m.svc = nil, nil, nil, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// clusterNodes are the server configurations of a three-node cluster on
// loopback under dir, named prefix0…prefix2.
func clusterNodes(dir, prefix, clusterName string) ([]natsnode.Config, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	cfgs := make([]natsnode.Config, 3)
	for i := range cfgs {
		var routes []string
		for j := 0; j < 3; j++ {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+j]))
			}
		}
		name := fmt.Sprintf("%s%d", prefix, i)
		cfgs[i] = natsnode.Config{DataDir: fmt.Sprintf("%s/%s", dir, name), Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Name: "tidemark-engine",
			ServerName: name, ClusterName: clusterName, ClusterListen: fmt.Sprintf("127.0.0.1:%d", ports[3+i]), Routes: routes}
	}
	return cfgs, nil
}

// startCluster starts three members with an R3 stream under dir.
func startCluster(ctx context.Context, dir string, log *slog.Logger) ([]*clusterMember, error) {
	cfgs, err := clusterNodes(dir, "n", "tidemark-bench")
	if err != nil {
		return nil, err
	}
	ms := make([]*clusterMember, 3)
	for i, nc := range cfgs {
		ms[i] = &clusterMember{name: nc.ServerName, nodeCfg: nc,
			cfg: engine.Config{Replicas: 3, TrustCommandTime: true, CheckpointEvery: -1, Coalesce: true, Logger: log.With("node", nc.ServerName)},
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.start(ctx) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range ms {
			m.stop()
		}
		return nil, err
	}
	return ms, nil
}

// writerOf is the member whose engine is the writer now, or nil.
func writerOf(ms []*clusterMember) *clusterMember {
	for _, m := range ms {
		if m.e != nil && !m.dead {
			if on, _ := m.m.Writing(); on {
				return m
			}
		}
	}
	return nil
}

// awaitWriter waits (bounded by ctx) until some member is the writer.
func awaitWriter(ctx context.Context, ms []*clusterMember) (*clusterMember, error) {
	for {
		if w := writerOf(ms); w != nil {
			return w, nil
		}
		var chs []<-chan struct{}
		for _, m := range ms {
			if m.e != nil && !m.dead {
				_, ch := m.m.Writing()
				chs = append(chs, ch)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		select {
		case <-wctx.Done():
		case <-firstOf(wctx, chs):
		}
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no writer: %w", ctx.Err())
		}
	}
}

func firstOf(ctx context.Context, chs []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	var once sync.Once
	for _, c := range chs {
		go func() {
			select {
			case <-c:
				once.Do(func() { close(out) })
			case <-ctx.Done():
			}
		}()
	}
	return out
}

// RunCluster runs the cluster experiment. It stops by itself: the load
// lasts opts.Duration, every retry is bounded by a deadline after it.
func RunCluster(ctx context.Context, opts ClusterOptions) (*ClusterResult, error) {
	if opts.Senders <= 0 {
		opts.Senders = 16
	}
	log := opts.Logger
	if log == nil {
		log = quiet()
	}
	dir, err := os.MkdirTemp("", "tidemark-cluster-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	ms, err := startCluster(sctx, dir, log)
	cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	var urls []string
	for _, m := range ms {
		urls = append(urls, m.node.ClientURL())
	}
	// One connection per member, preferring it, failing over to the others.
	clients := make([]*transport.Client, 3)
	for i := range ms {
		order := []string{urls[i], urls[(i+1)%3], urls[(i+2)%3]}
		nc, err := nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		clients[i] = transport.NewClient(nc)
		clients[i].Timeout = 5 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = awaitWriter(wctx, ms)
	cancel()
	if err != nil {
		return nil, err
	}
	// The completions' snapshots: one per sender, so no two senders race
	// on one table.
	for s := 0; s < opts.Senders; s++ {
		r, err := clients[0].Do(ctx, &commands.RegisterSnapshot{Meta: commands.Meta{ID: fmt.Sprintf("reg-load-%d", s), At: t0},
			Model: fmt.Sprintf("load%d", s), Version: "v1", Cron: "@hourly", Start: t0})
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("register: %w", err)
		}
	}

	res := &ClusterResult{}
	var mu sync.Mutex
	acked := map[string]bool{}
	ack := func(id string) {
		mu.Lock()
		acked[id] = true
		mu.Unlock()
	}
	start := time.Now()
	loadEnd := start.Add(opts.Duration)
	deadline := loadEnd.Add(time.Minute) // every retry ends by then
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// send retries cmd (same id) until it is answered with anything but
	// unavailable, or the deadline.
	send := func(c *transport.Client, cmd commands.Command) (commands.Reply, error) {
		for {
			r, err := c.Do(dctx, cmd)
			if err == nil && (r.Accepted || r.Code != commands.CodeUnavailable) {
				return r, nil
			}
			if dctx.Err() != nil {
				if err == nil {
					err = r.Err()
				}
				return r, err
			}
			select {
			case <-dctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	var wg sync.WaitGroup
	var offered, done int
	var loadErr error
	gap := time.Duration(0)
	if opts.Rate > 0 {
		gap = time.Duration(float64(time.Second) * float64(opts.Senders) / float64(opts.Rate))
	}
	for s := 0; s < opts.Senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[s%3]
			next := time.Now()
			for h := 0; time.Now().Before(loadEnd); h++ {
				if gap > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d) // pacing the offered rate
					}
					next = next.Add(gap)
				}
				id := fmt.Sprintf("load-%d-%d", s, h)
				from := t0.Add(time.Duration(h) * time.Hour)
				cmd := &commands.CompleteIntervals{Meta: commands.Meta{ID: id, At: t0.Add(1_000_000 * time.Hour)}, Model: fmt.Sprintf("load%d", s),
					Version: "v1", Ranges: []interval.Range{interval.R(from, from.Add(time.Hour))}, RunKind: events.RunScheduled}
				mu.Lock()
				offered++
				mu.Unlock()
				r, err := send(c, cmd)
				if err == nil && !r.Accepted {
					err = r.Err()
				}
				if err != nil {
					mu.Lock()
					if loadErr == nil {
						loadErr = fmt.Errorf("completion %s: %w", id, err)
					}
					mu.Unlock()
					return
				}
				ack(id)
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}

	// Promotions, evenly spaced, each through other members than the one
	// that built its plan; after each decision a third member is asked.
	var lat []time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := opts.Duration / time.Duration(opts.Promotions+1)
		for i := 0; i < opts.Promotions; i++ {
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * every))) // spacing the promotions
			env, model, plan := fmt.Sprintf("env%d", i), fmt.Sprintf("pm%d", i), fmt.Sprintf("plan%d", i)
			at := t0.Add(24 * time.Hour)
			a, b, c := clients[i%3], clients[(i+1)%3], clients[(i+2)%3]
			fail := func(what string, r commands.Reply, err error) {
				if err == nil {
					err = r.Err()
				}
				mu.Lock()
				res.Undecided = append(res.Undecided, fmt.Sprintf("%s %s: %v", plan, what, err))
				mu.Unlock()
			}
			r, err := send(a, &commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg-" + plan, At: at}, Model: model, Version: "v1", Cron: "@hourly", Start: t0})
			if err != nil || !r.Accepted {
				fail("register", r, err)
				continue
			}
			r, err = send(a, &commands.BuildPlan{Meta: commands.Meta{ID: "build-" + plan, At: at}, Plan: plan, Env: env, Versions: map[string]string{model: "v1"}})
			if err != nil || !r.Accepted {
				fail("build", r, err)
				continue
			}
			if bf := r.Plan.Candidates[0].Backfill; len(bf) > 0 {
				r, err = send(a, &commands.CompleteIntervals{Meta: commands.Meta{ID: "fill-" + plan, At: at}, Model: model, Version: "v1", Ranges: bf, RunKind: events.RunBackfill})
				if err != nil || !r.Accepted {
					fail("backfill", r, err)
					continue
				}
			}
			seen := r.Seq
			began := time.Now()
			r, err = send(b, &commands.Promote{Meta: commands.Meta{ID: "promote-" + plan, At: at, AfterSeq: seen}, Plan: plan})
			took := time.Since(began)
			if err != nil || r.Decision == nil {
				fail("promote", r, err)
				continue
			}
			mu.Lock()
			res.Decided++
			lat = append(lat, took)
			mu.Unlock()
			// Read your writes on a third member.
			q, err := send(c, &commands.Status{Meta: commands.Meta{AfterSeq: r.Seq}, Env: env})
			mu.Lock()
			res.ReadChecks++
			if err != nil || !q.Accepted {
				if err == nil {
					err = q.Err()
				}
				res.ReadMisses = append(res.ReadMisses, fmt.Sprintf("status %s after seq %d: %v", env, r.Seq, err))
			}
			mu.Unlock()
		}
	}()

	if opts.Failover {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(opts.Duration / 2))) // halfway through the load
			old := writerOf(ms)
			if old == nil {
				return
			}
			stopped := time.Now()
			if opts.Crash {
				old.dead = true
				old.node.Server().Shutdown()
				defer old.stop()
			} else {
				old.stop()
			}
			log.Info("stopped the writer's member", "member", old.name, "crash", opts.Crash, "took", time.Since(stopped))
			mu.Lock()
			before := done
			mu.Unlock()
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			nw, err := awaitWriter(fctx, ms)
			if err != nil {
				mu.Lock()
				res.Undecided = append(res.Undecided, "failover: "+err.Error())
				mu.Unlock()
				return
			}
			// The new writer has acknowledged a command once the count of
			// acknowledged completions moves (bounded by the load).
			for time.Now().Before(deadline) {
				mu.Lock()
				moved := done > before
				mu.Unlock()
				if moved {
					break
				}
				time.Sleep(5 * time.Millisecond) // polling the load's progress, bounded by the deadline
			}
			mu.Lock()
			res.Failover, res.OldWriter, res.NewWriter = time.Since(stopped), old.name, nw.name
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if loadErr != nil {
		return res, loadErr
	}
	res.Offered, res.Acked = offered, done
	res.Rate = float64(done) / min(elapsed, opts.Duration+time.Second).Seconds()
	if len(lat) > 0 {
		res.DecisionP50, res.DecisionP99 = percentile(lat, 0.5), percentile(lat, 0.99)
	}
	// Everything acknowledged is stored exactly once.
	var reader *clusterMember
	for _, m := range ms {
		if m.e != nil {
			reader = m
		}
	}
	if err := reader.e.CatchUp(ctx); err != nil {
		return res, err
	}
	recs, err := reader.e.Log().Reader().Read(ctx, eventlog.ReadOptions{})
	if err != nil {
		return res, err
	}
	res.Events = len(recs)
	stored := map[string]int{}
	for _, r := range recs {
		if _, ok := r.Event.Payload.(events.IntervalsCompleted); ok {
			stored[r.Event.Causation]++
		}
	}
	for id := range acked {
		if stored[id] != 1 {
			res.Lost = append(res.Lost, fmt.Sprintf("%s stored %d times", id, stored[id]))
		}
	}
	return res, nil
}

// The cluster goals (issue 16): every promotion decided while 1,400
// completions a second arrive, p99 decision latency under 1 s; a new
// writer within 5 s of the writer's member stopping, nothing acknowledged
// lost; a member answering right after another's acknowledgement never
// says not_found.
const (
	clusterRate      = 1400
	clusterP99Goal   = time.Second
	clusterFailGoal  = 5 * time.Second
	clusterQuickLoad = 10 * time.Second
	clusterFullLoad  = 30 * time.Second
)

func clusterFigures(ctx context.Context, sz sizes) ([]Figure, error) {
	load := clusterFullLoad
	if sz.commands < 100_000 {
		load = clusterQuickLoad
	}
	res, err := RunCluster(ctx, ClusterOptions{Rate: clusterRate, Duration: load, Senders: 64, Promotions: 20, Failover: true})
	if err != nil {
		return nil, err
	}
	crash, err := RunCluster(ctx, ClusterOptions{Rate: clusterRate, Duration: clusterQuickLoad, Senders: 64, Promotions: 5, Failover: true, Crash: true})
	if err != nil {
		return nil, err
	}
	tp, err := clusterThroughput(ctx, sz.commands/5)
	if err != nil {
		return nil, err
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	decided := len(res.Undecided) == 0 && res.Decided == 20
	return []Figure{
		{Name: "cluster: command throughput (16 clients on the writer's member, R3, complete_intervals over 1,000 snapshots)", Tidemark: tp.bare.tidemark, Limit: tp.bare.limit, Raw: tp.bare.limit, Unit: "ops/s",
			Ratio: tp.bare.tidemark / tp.bare.limit, Goal: ">= 0.8 of the transport limit on R3", Pass: tp.bare.tidemark/tp.bare.limit >= 0.8,
			Note: fmt.Sprintf("limit: the same nats.go service on a 3-node R3 cluster of its own, rounds alternated; %s; CPU per command %d µs vs %d µs; "+
				"with a reader decoding every event on each node (as each member folds it): limit %.0f ops/s (%.2f of the bare limit: "+
				"the ceiling of a design whose three members each decode every event, on these %d cores), tidemark %.0f, ratio %.3f",
				tp.where, tp.bare.tidemarkCPU.Microseconds(), tp.bare.limitCPU.Microseconds(), tp.readers.limit, tp.readers.limit/tp.bare.limit,
				runtime.NumCPU(), tp.readers.tidemark, tp.readers.tidemark/tp.readers.limit)},
		{Name: "cluster: completions sustained (3 members, R3, 64 clients through all members)", Tidemark: res.Rate, Raw: clusterRate, Unit: "ops/s",
			Ratio: res.Rate / clusterRate, Goal: ">= 0.95 of the offered 1,400/s", Pass: res.Rate >= 0.95*clusterRate,
			Note: fmt.Sprintf("%d of %d offered completions acknowledged in %s of load, the writer's member stopped halfway", res.Acked, res.Offered, load)},
		{Name: "cluster: promotion decision latency p99 under that load", Tidemark: ms(res.DecisionP99), Raw: ms(clusterP99Goal), Unit: "ms",
			Ratio: ms(res.DecisionP99) / ms(clusterP99Goal), Goal: "< 1 s, every promotion decided", Pass: decided && res.DecisionP99 < clusterP99Goal,
			Note: fmt.Sprintf("%d of 20 decided, p50 %.1f ms; undecided: %v", res.Decided, ms(res.DecisionP50), res.Undecided)},
		{Name: "cluster: failover (writer's member stopped → new writer acknowledging)", Tidemark: ms(res.Failover), Raw: ms(clusterFailGoal), Unit: "ms",
			Ratio: ms(res.Failover) / ms(clusterFailGoal), Goal: "< 5 s, nothing acknowledged lost", Pass: res.NewWriter != "" && res.Failover < clusterFailGoal && len(res.Lost) == 0,
			Note: fmt.Sprintf("%s → %s; %d acknowledged commands not stored exactly once", res.OldWriter, res.NewWriter, len(res.Lost))},
		{Name: "cluster: failover after a crash (the lease is not given up)", Tidemark: ms(crash.Failover), Raw: ms(clusterFailGoal), Unit: "ms",
			Ratio: ms(crash.Failover) / ms(clusterFailGoal), Goal: "< 5 s, nothing acknowledged lost", Pass: crash.NewWriter != "" && crash.Failover < clusterFailGoal && len(crash.Lost) == 0 && len(crash.Undecided) == 0,
			Note: fmt.Sprintf("%s → %s after the lease's 2 s TTL; %d acknowledged commands not stored exactly once; %d of 5 promotions decided", crash.OldWriter, crash.NewWriter, len(crash.Lost), crash.Decided)},
		{Name: "cluster: read-your-writes on another member after an acknowledgement", Tidemark: float64(len(res.ReadMisses)), Unit: "not_found answers",
			Goal: "0", Pass: res.ReadChecks > 0 && len(res.ReadMisses) == 0, Note: fmt.Sprintf("%d reads, each with the acknowledged seq as after_seq", res.ReadChecks)},
	}, nil
}
