package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
)

// node is one cluster member: an embedded server with its engine and
// command service.
type node struct {
	name string
	ncfg natsnode.Config
	cfg  engine.Config
	n    *natsnode.Node
	e    *engine.Engine
	svc  *transport.Service
}

func (n *node) start(ctx context.Context) error {
	nn, err := natsnode.Start(ctx, n.ncfg)
	if err != nil {
		return err
	}
	e, err := engine.Open(ctx, nn.Conn(), n.cfg)
	if err != nil {
		nn.Close()
		return err
	}
	svc, err := transport.Serve(nn.Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		e.Close(context.Background())
		nn.Close()
		return err
	}
	n.n, n.e, n.svc = nn, e, svc
	return nil
}

func (n *node) stop() {
	if n.e == nil {
		return
	}
	n.svc.Stop()
	n.e.Close(context.Background())
	n.n.Close()
	n.n, n.e, n.svc = nil, nil, nil
}

// startCluster starts three embedded cluster members with an R3 stream.
func startCluster(t *testing.T) []*node {
	t.Helper()
	cfgs := jstest.ClusterConfigs(t, 3)
	nodes := make([]*node, len(cfgs))
	for i, c := range cfgs {
		nodes[i] = &node{name: c.ServerName, ncfg: c,
			cfg: engine.Config{Replicas: 3, Logger: clusterLog(c.ServerName), TrustCommandTime: true}}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.start(ctx) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	return nodes
}

func running(nodes []*node) *node {
	for _, n := range nodes {
		if n.e != nil {
			return n
		}
	}
	return nil
}

// TestNodeLoss: a 3-node cluster under a steady command load loses its
// stream leader, then a follower; commands resume after the election, no
// acknowledged command is lost or applied twice, and restarted nodes catch
// up.
func TestNodeLoss(t *testing.T) {
	nodes := startCluster(t)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.n.ClientURL())
	}
	nc, err := nats.Connect(urls[0]+","+urls[1]+","+urls[2], nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client := transport.NewClient(nc)
	client.Timeout = 3 * time.Second

	type ack struct {
		id string
		at time.Time
	}
	var mu sync.Mutex
	var acks []ack
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	go func() {
		// Bounded: at most 100,000 commands, and until stopped.
		for i := 0; i < 100_000 && loadCtx.Err() == nil; i++ {
			id := fmt.Sprintf("load-%05d", i)
			cmd := &commands.RegisterSnapshot{Meta: commands.Meta{ID: id, At: at(1)}, Model: "load", Version: fmt.Sprintf("v%d", i), Cron: "@hourly", Start: t0}
			for attempt := 0; ; attempt++ {
				if loadCtx.Err() != nil {
					loadDone <- nil
					return
				}
				if attempt > 200 {
					loadDone <- fmt.Errorf("%s: no answer after %d attempts", id, attempt)
					return
				}
				r, err := client.Do(loadCtx, cmd)
				if err == nil && r.Accepted {
					mu.Lock()
					acks = append(acks, ack{id, time.Now()})
					mu.Unlock()
					break
				}
				time.Sleep(20 * time.Millisecond) // retry pacing, bounded by the attempt count
			}
		}
		loadDone <- nil
	}()
	acked := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	waitAcks := func(n int) {
		deadline := time.Now().Add(90 * time.Second)
		for acked() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d commands acknowledged", acked(), n)
			}
			time.Sleep(10 * time.Millisecond) // polling the load's progress, bounded
		}
	}
	leader := func() string {
		info, err := running(nodes).e.Log().JetStream().Stream(ctx, events.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		si, err := info.Info(ctx)
		if err != nil || si.Cluster == nil {
			t.Fatalf("stream info: %v", err)
		}
		return si.Cluster.Leader
	}
	// pause is the longest gap between acknowledgements after index from.
	pause := func(from int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		var worst time.Duration
		for i := from + 1; i < len(acks); i++ {
			if d := acks[i].at.Sub(acks[i-1].at); d > worst {
				worst = d
			}
		}
		return worst
	}
	for _, which := range []string{"leader", "follower"} {
		waitAcks(acked() + 100)
		lead := leader()
		var victim *node
		for _, n := range nodes {
			if (which == "leader") == (n.name == lead) && n.e != nil {
				victim = n
				break
			}
		}
		from := acked()
		victim.stop()
		waitAcks(from + 100)
		t.Logf("stopped the %s %s: longest pause between acknowledged commands %s", which, victim.name, pause(from))
		if err := victim.start(ctx); err != nil {
			t.Fatalf("restart %s: %v", victim.name, err)
		}
		last, err := victim.e.Log().Reader().LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := victim.e.CatchUp(ctx); err != nil || victim.e.Stats().Seq < last {
			t.Fatalf("restarted %s did not catch up: %v (%d < %d)", victim.name, err, victim.e.Stats().Seq, last)
		}
	}
	stopLoad()
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	recs, err := jstest.ReadLog(ctx, running(nodes).e.Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, r := range recs {
		if _, ok := r.Event.Payload.(events.SnapshotRegistered); ok {
			stored[r.Event.Causation]++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		if stored[a.id] != 1 {
			t.Fatalf("acknowledged %s is stored %d times", a.id, stored[a.id])
		}
	}
	t.Logf("%d commands acknowledged, all stored exactly once (%d events)", len(acks), len(recs))
}

func clusterLog(name string) *slog.Logger {
	if os.Getenv("TIDEMARK_CLUSTER_LOG") == "" {
		return quiet()
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
}
