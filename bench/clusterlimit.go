package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
)

// The cluster's command throughput: tidemark on the three-member cluster
// (R3 stream, one writer) against the transport limit on a three-node
// cluster of its own with the same stream settings at R3, 16 clients on
// each side awaiting their replies, in alternating rounds. Each side's
// service and clients are on one node: tidemark's on the writer's member,
// the limit's on the node in the same place relative to its stream's
// leader (the leader itself when the writer's member leads tidemark's
// stream, else another node), so that both pay the same hops to the
// stream leader and its replicas.

// clusterTP is what clusterThroughput measured: tidemark against the
// bare limit, and again against the limit with a reader on each node
// decoding every event (what each tidemark member does for its live
// projection).
type clusterTP struct {
	bare, readers sides
	where         string
}

// clusterThroughput measures total commands a side, twice.
func clusterThroughput(ctx context.Context, total int) (clusterTP, error) {
	dir, err := os.MkdirTemp("", "tidemark-cluster-tp-*")
	if err != nil {
		return clusterTP{}, err
	}
	defer os.RemoveAll(dir)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ms, err := startCluster(sctx, dir, quiet())
	if err != nil {
		return clusterTP{}, err
	}
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	w, err := awaitWriter(sctx, ms)
	if err != nil {
		return clusterTP{}, err
	}
	if err := snapshots(sctx, w.m, benchSnapshots); err != nil {
		return clusterTP{}, err
	}
	leader, err := streamLeader(sctx, w.e.Log().JetStream())
	if err != nil {
		return clusterTP{}, err
	}
	var cs []*transport.Client
	for range benchClients {
		nc, err := nats.Connect("", nats.InProcessServer(w.node.Server()))
		if err != nil {
			return clusterTP{}, err
		}
		defer nc.Close()
		cs = append(cs, transport.NewClient(nc))
	}
	lim, limLeader, err := limitCluster(sctx, dir, leader == w.name)
	if err != nil {
		return clusterTP{}, err
	}
	defer lim.close()
	res := clusterTP{where: fmt.Sprintf("tidemark's writer %s, its stream's leader %s; the limit's service on %s", w.name, leader, limLeader)}
	if res.bare, err = sideBySide(ctx, cs, lim, total, 4, benchSnapshots, "ctp"); err != nil {
		return res, err
	}
	stop, err := limitReaders(sctx, lim.nodes)
	if err != nil {
		return res, err
	}
	defer stop()
	res.readers, err = sideBySide(ctx, cs, lim, total, 4, benchSnapshots, "ctr")
	return res, err
}

// streamLeader names the server leading the event stream.
func streamLeader(ctx context.Context, js jetstream.JetStream) (string, error) {
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return "", err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", errors.New("the event stream has no leader")
	}
	return info.Cluster.Leader, nil
}

// limitCluster starts three bare nodes under dir with the event stream at
// R3 and the limit service on the stream's leader (onLeader) or on another
// node; it returns the side and where its service runs.
func limitCluster(ctx context.Context, dir string, onLeader bool) (*limitSide, string, error) {
	cfgs, err := clusterNodes(dir, "l", "tidemark-bench-limit")
	if err != nil {
		return nil, "", err
	}
	nodes := make([]*natsnode.Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, c := range cfgs {
		wg.Add(1)
		go func() { defer wg.Done(); nodes[i], errs[i] = natsnode.Start(ctx, c) }()
	}
	wg.Wait()
	stop := func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, "", err
	}
	js, err := jetstream.New(nodes[0].Conn())
	if err != nil {
		stop()
		return nil, "", err
	}
	// The meta leader is elected after the routes form: try until it is.
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.CreateOrUpdateStream(actx, eventlog.StreamConfig(3, false))
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, "", fmt.Errorf("limit cluster: stream: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	leader, err := streamLeader(ctx, js)
	if err != nil {
		stop()
		return nil, "", err
	}
	at := nodes[0]
	for i, c := range cfgs {
		if (c.ServerName == leader) == onLeader {
			at = nodes[i]
			break
		}
	}
	lim, err := limitOn(at, stop)
	if err != nil {
		return nil, "", err
	}
	for _, n := range nodes {
		lim.nodes = append(lim.nodes, n.Conn())
	}
	return lim, at.Server().Name(), nil
}
