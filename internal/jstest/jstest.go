// Package jstest is the one server harness for tests: embedded NATS
// servers with JetStream (natsnode) and engines on them.
//
// Invariants: every server it starts listens on 127.0.0.1 only, on a
// random port, with its store in a t.TempDir() unless the test names a
// data dir; everything it starts is closed by t.Cleanup, an engine before
// the server it runs on.
//
// Importers: tests only (integration, scenario, web, replay, bench,
// cmd/tidemark).
package jstest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
)

// Quiet is a logger that discards everything.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Node starts an embedded server for t from cfg (at most one; the zero
// Config by default): DataDir defaults to a new t.TempDir() and Listen to
// 127.0.0.1:-1 (a random port), unless cfg.NatsURL is set. t fails when it
// does not start; t.Cleanup closes it.
func Node(t testing.TB, cfg ...natsnode.Config) *natsnode.Node {
	t.Helper()
	if len(cfg) > 1 {
		t.Fatalf("jstest.Node: %d configs, want at most one", len(cfg))
	}
	var c natsnode.Config
	if len(cfg) == 1 {
		c = cfg[0]
	}
	if c.NatsURL == "" {
		if c.DataDir == "" {
			c.DataDir = t.TempDir()
		}
		if c.Listen == "" {
			c.Listen = "127.0.0.1:-1"
		}
	}
	n, err := natsnode.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// Engine opens an engine for t with cfg (Logger defaults to Quiet()) on
// node, by default a new Node(t). t fails when it does not open;
// t.Cleanup closes it (before node, which was started first).
func Engine(t testing.TB, cfg engine.Config, node ...*natsnode.Node) *engine.Engine {
	t.Helper()
	if len(node) > 1 {
		t.Fatalf("jstest.Engine: %d nodes, want at most one", len(node))
	}
	var n *natsnode.Node
	if len(node) == 1 {
		n = node[0]
	} else {
		n = Node(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet()
	}
	e, err := engine.Open(t.Context(), n.Conn(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// ClusterConfigs returns the configs of n members of one JetStream
// cluster on 127.0.0.1 (servers n0, n1, …): free client and route ports,
// each store in its own t.TempDir(), every member routed to the others.
// Tests that stop and restart members start them with natsnode.Start.
func ClusterConfigs(t testing.TB, n int) []natsnode.Config {
	t.Helper()
	routes, clients := FreePorts(t, n), FreePorts(t, n)
	cfgs := make([]natsnode.Config, n)
	for i := range cfgs {
		var rs []string
		for j, p := range routes {
			if j != i {
				rs = append(rs, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		cfgs[i] = natsnode.Config{
			DataDir: t.TempDir(), Listen: fmt.Sprintf("127.0.0.1:%d", clients[i]), ServerName: fmt.Sprintf("n%d", i),
			ClusterName: "tidemark-test", ClusterListen: fmt.Sprintf("127.0.0.1:%d", routes[i]), Routes: rs,
		}
	}
	return cfgs
}

// ClusterWait bounds how long Cluster waits for JetStream to be ready.
const ClusterWait = 2 * time.Minute

// Cluster starts the n members of ClusterConfigs(t, n) and waits until
// JetStream answers on every one of them (a meta leader is elected). t
// fails otherwise; t.Cleanup closes them.
func Cluster(t testing.TB, n int) []*natsnode.Node {
	t.Helper()
	nodes := make([]*natsnode.Node, n)
	for i, c := range ClusterConfigs(t, n) {
		nodes[i] = Node(t, c)
	}
	ctx, cancel := context.WithTimeout(t.Context(), ClusterWait)
	defer cancel()
	for i, node := range nodes {
		js, err := jetstream.New(node.Conn())
		if err != nil {
			t.Fatal(err)
		}
		for {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := js.AccountInfo(actx)
			acancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("jstest.Cluster: member n%d: JetStream not ready after %s: %v", i, ClusterWait, err)
			case <-time.After(100 * time.Millisecond): // polling the election, bounded by ctx
			}
		}
	}
	return nodes
}

// FreePorts returns n distinct loopback ports, free at the time of the
// call (for a server that must be restarted on the same address).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// ReadLog reads js's whole event stream (eventlog.Reader.Read), damage
// and all: the error names what the stream lost.
func ReadLog(ctx context.Context, js jetstream.JetStream) ([]events.Record, error) {
	r, err := eventlog.OpenReader(ctx, js)
	if err != nil {
		return nil, err
	}
	return r.Read(ctx, eventlog.ReadOptions{})
}

// CorruptEvent flips one byte of the event id stored in the block file
// blk (of a stopped store): that one message no longer matches its
// checksum. t fails unless id is stored exactly once in blk.
func CorruptEvent(t testing.TB, blk, id string) {
	t.Helper()
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(id))
	if i < 0 || bytes.Count(b, []byte(id)) != 1 {
		t.Fatalf("event %s not stored once in %s", id, blk)
	}
	b[i+len(id)/2] ^= 0x01
	if err := os.WriteFile(blk, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
