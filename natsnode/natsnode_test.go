package natsnode

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // a substring of the error; empty: valid
	}{
		{"embedded", Config{DataDir: "d"}, ""},
		{"dialled", Config{NatsURL: "nats://127.0.0.1:4222"}, ""},
		{"nothing", Config{}, "DataDir is required"},
		{"listen with url", Config{NatsURL: "nats://x:1", Listen: "127.0.0.1:1"}, "Listen applies"},
		{"cluster with url", Config{NatsURL: "nats://x:1", Routes: []string{"nats://y:2"}}, "cluster options"},
		{"auth with url", Config{NatsURL: "nats://x:1", AuthFile: "a.conf"}, "AuthFile and TLS"},
		{"half TLS", Config{DataDir: "d", TLSCert: "c.pem"}, "both TLSCert and TLSKey"},
		{"half cluster", Config{DataDir: "d", ClusterName: "c"}, "both ClusterName and ClusterListen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", err, c.want)
			}
		})
	}
}

func TestSplitHostPort(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:4222": "127.0.0.1 4222", "[::1]:-1": "[::1] -1", ":7": " 7"} {
		h, p, err := splitHostPort(in)
		if err != nil || h+" "+strconv.Itoa(p) != want {
			t.Errorf("%q: %q %d %v, want %q", in, h, p, err, want)
		}
	}
	for _, in := range []string{"localhost", "127.0.0.1:x"} {
		if _, _, err := splitHostPort(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestStart: an embedded node without Listen is in-process only and
// creates no stream; one with Listen serves clients on loopback; Close
// may be called twice.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	n, err := Start(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if n.ClientURL() != "" || n.Server() == nil || !n.Conn().IsConnected() {
		t.Fatalf("in-process node: url %q", n.ClientURL())
	}
	js, err := jetstream.New(n.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if names := js.StreamNames(t.Context()); names.Err() != nil {
		t.Fatal(names.Err())
	} else {
		for s := range names.Name() {
			t.Fatalf("a new node holds stream %s", s)
		}
	}
	n.Close()
	n.Close()

	l, err := Start(t.Context(), Config{DataDir: dir, Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := Start(t.Context(), Config{NatsURL: l.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Server() != nil || d.ClientURL() != l.ClientURL() || !d.Conn().IsConnected() {
		t.Fatalf("dialled node: url %q", d.ClientURL())
	}
}

// TestCheckStoreAccount: a store whose event stream lives in another
// account is refused; the same account, or a new store, is not.
func TestCheckStoreAccount(t *testing.T) {
	store := t.TempDir()
	if err := checkStoreAccount(filepath.Join(store, "none"), "$G"); err != nil {
		t.Fatalf("new store: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(store, "$G", "streams", events.StreamName), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkStoreAccount(store, "$G"); err != nil {
		t.Fatalf("same account: %v", err)
	}
	if err := checkStoreAccount(store, "TIDEMARK"); err == nil || !strings.Contains(err.Error(), `account "$G"`) {
		t.Fatalf("other account: %v", err)
	}
}

// A client or cluster port in use fails Start at once, naming the
// address: checked before the server starts, and, when taken after the
// check, from the server's own fatal message (without either, Start
// waited 30 s for a server that never became ready).
func TestBusyPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	for _, skipCheck := range []bool{false, true} {
		if skipCheck {
			checkFree = func(string, int, string, bool) error { return nil }
			t.Cleanup(func() { checkFree = free })
		}
		for _, c := range []struct {
			name string
			cfg  Config
			say  string
		}{
			{"clients", Config{DataDir: t.TempDir(), Listen: addr}, addr},
			{"cluster", Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", ClusterName: "c", ClusterListen: addr, Routes: []string{"nats://" + addr}}, strings.Split(addr, ":")[1]},
		} {
			n, err := Start(t.Context(), c.cfg)
			if err == nil {
				n.Close()
				t.Fatalf("%s (skip check %v): started on a port in use", c.name, skipCheck)
			}
			if !strings.Contains(err.Error(), c.say) || strings.Contains(err.Error(), "did not become ready") {
				t.Fatalf("%s (skip check %v): %v, want it naming %s", c.name, skipCheck, err, c.say)
			}
			// The data dir is free again.
			if n, err := Start(t.Context(), Config{DataDir: c.cfg.DataDir}); err != nil {
				t.Fatalf("%s: the data dir after the failure: %v", c.name, err)
			} else {
				n.Close()
			}
		}
	}
}
