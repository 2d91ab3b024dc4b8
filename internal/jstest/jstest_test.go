package jstest

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
)

// TestNode: a node listens on loopback only, and an engine opens on it.
func TestNode(t *testing.T) {
	n := Node(t)
	if url := n.ClientURL(); !strings.HasPrefix(url, "nats://127.0.0.1:") {
		t.Fatalf("client URL %q, want loopback", url)
	}
	e := Engine(t, engine.Config{}, n)
	if _, err := e.Log().Reader().LastSeq(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestCluster: three members form a JetStream cluster on which an engine
// creates its stream with three replicas, seen from every member.
func TestCluster(t *testing.T) {
	nodes := Cluster(t, 3)
	Engine(t, engine.Config{Replicas: 3}, nodes[0])
	for i, n := range nodes {
		js, err := jetstream.New(n.Conn())
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(t.Context(), events.StreamName)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("member %d: %d replicas, want 3", i, r)
		}
	}
}
