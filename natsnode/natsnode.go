// Package natsnode is tidemark's NATS server: it starts an embedded
// nats-server with JetStream on a data dir (optionally listening for
// clients, a member of a JetStream cluster, with users, accounts and TLS
// from an auth file), or connects to an external server, and hands out the
// one connection the process's components share.
//
// Invariants: it creates no stream, bucket or consumer and writes nothing
// to one, so a reader may start a node on the data dir of a stopped store
// and change nothing there; the store directory is <DataDir>/jetstream;
// an embedded node holds the OS lock of <DataDir>/serve.lock (LockDataDir)
// from before its server starts until it has stopped, so a second node on
// the same data dir, in any process, fails at once naming the holder; a
// store whose event stream lives in another NATS account than the
// configured user's is refused (checkStoreAccount), never opened empty.
// Close drains the connection, then stops the embedded server.
//
// Importers: server (serve), cmd/tidemark (demo, bench and the read-only
// verbs), scenario, bench, internal/jstest.
package natsnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/events"
)

// Config configures a Node. The zero value plus DataDir is a working
// embedded server reachable in-process only.
type Config struct {
	// DataDir holds the embedded server's JetStream store. Required unless
	// NatsURL is set.
	DataDir string
	// NatsURL connects to an external NATS server instead of embedding one.
	NatsURL string
	// Listen makes the embedded server accept clients on HOST:PORT (e.g.
	// 127.0.0.1:4222; port -1: a random free port). Empty: in-process
	// connections only.
	Listen string
	// SyncAlways makes the embedded server fsync every append before it
	// acknowledges it. Without it an acknowledged event can be lost if the
	// machine (not just the process) crashes within the sync interval.
	SyncAlways bool
	// ServerName names the embedded server (unique in a cluster). Default
	// "tidemark".
	ServerName string
	// ClusterName, ClusterListen (HOST:PORT) and Routes (nats://HOST:PORT
	// of the other members) make the embedded server a member of a
	// JetStream cluster.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// AuthFile is a nats-server configuration whose users and accounts
	// (authorization and accounts blocks: permissions, exports, imports)
	// the embedded server loads; User and Password are the node's own
	// connection's credentials (an admin), and the streams live in that
	// user's account. See docs/auth.conf.
	AuthFile, User, Password string
	// TLSCert and TLSKey (PEM files) make the embedded server require TLS
	// from network clients.
	TLSCert, TLSKey string
	// Name is the connection's client name. Default "tidemark".
	Name string
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.NatsURL == "" && c.DataDir == "" {
		errs = append(errs, errors.New("natsnode: DataDir is required for the embedded server"))
	}
	if c.NatsURL != "" && c.Listen != "" {
		errs = append(errs, errors.New("natsnode: Listen applies to the embedded server only, not with NatsURL"))
	}
	if c.NatsURL != "" && (c.ClusterName != "" || c.ClusterListen != "" || len(c.Routes) > 0) {
		errs = append(errs, errors.New("natsnode: cluster options apply to the embedded server only, not with NatsURL"))
	}
	if c.NatsURL != "" && (c.AuthFile != "" || c.TLSCert != "") {
		errs = append(errs, errors.New("natsnode: AuthFile and TLS apply to the embedded server; put credentials in NatsURL"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("natsnode: TLS needs both TLSCert and TLSKey"))
	}
	if (c.ClusterName == "") != (c.ClusterListen == "") {
		errs = append(errs, errors.New("natsnode: a cluster member needs both ClusterName and ClusterListen"))
	}
	return errors.Join(errs...)
}

// Node is a started NATS server (or a connection to an external one).
type Node struct {
	cfg   Config
	srv   *server.Server
	lock  *DirLock // the data dir's, while the embedded server runs
	nc    *nats.Conn
	close sync.Once
}

// Start starts the embedded server on cfg.DataDir and connects to it in
// process, or, with cfg.NatsURL, connects to that server (reconnecting
// for ever).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "tidemark"
	}
	n := &Node{cfg: cfg}
	var err error
	if cfg.NatsURL != "" {
		if n.nc, err = nats.Connect(cfg.NatsURL, nats.Name(cfg.Name), nats.MaxReconnects(-1)); err != nil {
			return nil, fmt.Errorf("natsnode: connect: %w", err)
		}
		return n, nil
	}
	// One server per data dir: a second one on the same store (another
	// serve, a reader on a running serve's dir) fails here, naming the
	// holder, before JetStream touches anything.
	if n.lock, err = LockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if n.srv, err = startEmbedded(cfg); err != nil {
		_ = n.lock.Unlock()
		return nil, err
	}
	opts := []nats.Option{nats.InProcessServer(n.srv), nats.Name(cfg.Name)}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if n.nc, err = nats.Connect("", opts...); err != nil {
		n.shutdownServer()
		return nil, fmt.Errorf("natsnode: connect: %w", err)
	}
	return n, nil
}

// Conn is the node's connection (as Config.User with an auth file).
func (n *Node) Conn() *nats.Conn { return n.nc }

// Server is the embedded server, or nil with NatsURL.
func (n *Node) Server() *server.Server { return n.srv }

// ClientURL is a URL other processes can connect to, when there is one:
// the embedded server's when it listens, else NatsURL (empty for an
// in-process-only server).
func (n *Node) ClientURL() string {
	if n.srv != nil && n.cfg.Listen != "" {
		return n.srv.ClientURL()
	}
	return n.cfg.NatsURL
}

// Close drains and closes the connection, then stops the embedded server.
// Close the components using Conn first. It may be called more than once.
func (n *Node) Close() {
	n.close.Do(func() {
		if n.nc != nil {
			_ = n.nc.Drain()
			n.nc.Close()
		}
		n.shutdownServer()
	})
}

func (n *Node) shutdownServer() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
	_ = n.lock.Unlock()
}

// startEmbedded starts an in-process nats-server with JetStream whose store
// lives under cfg.DataDir.
func startEmbedded(cfg Config) (*server.Server, error) {
	opts := &server.Options{
		ServerName:         "tidemark",
		Host:               "127.0.0.1",
		Port:               server.RANDOM_PORT,
		JetStream:          true,
		JetStreamMaxMemory: 256 << 20,
		StoreDir:           filepath.Join(cfg.DataDir, "jetstream"),
		SyncAlways:         cfg.SyncAlways,
		NoLog:              true,
		NoSigs:             true,
		DontListen:         cfg.Listen == "",
		MaxPayload:         8 << 20,
	}
	if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	if cfg.ServerName != "" {
		opts.ServerName = cfg.ServerName
	}
	if cfg.ClusterName != "" {
		host, port, err := splitHostPort(cfg.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("natsnode: cluster listen: %w", err)
		}
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: host, Port: port}
		for _, r := range cfg.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("natsnode: route %q: want nats://HOST:PORT", r)
			}
			opts.Routes = append(opts.Routes, u)
		}
		// A cluster member must be reachable by clients of the others.
		opts.DontListen = false
	}
	account := server.DEFAULT_GLOBAL_ACCOUNT // where the streams live
	if cfg.AuthFile != "" {
		fileOpts, err := server.ProcessConfigFile(cfg.AuthFile)
		if err != nil {
			return nil, fmt.Errorf("natsnode: auth file: %w", err)
		}
		if len(fileOpts.Users) == 0 && len(fileOpts.Nkeys) == 0 {
			return nil, fmt.Errorf("natsnode: auth file %s defines no users", cfg.AuthFile)
		}
		// The users, and the accounts they live in with their exports
		// and imports (docs/auth.conf puts the streams and the engine in
		// one account and each client role in its own).
		opts.Users, opts.Nkeys, opts.Accounts = fileOpts.Users, fileOpts.Nkeys, fileOpts.Accounts
		for _, u := range fileOpts.Users {
			if u.Username == cfg.User && u.Account != nil {
				account = u.Account.Name
			}
		}
	}
	if err := checkStoreAccount(filepath.Join(opts.StoreDir, server.JetStreamStoreDir), account); err != nil {
		return nil, err
	}
	if cfg.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("natsnode: TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS = tc, true
	}
	// A port in use fails here at once, naming it (the server itself
	// would only log it and never become ready).
	if err := checkFree(opts.Host, opts.Port, "clients", !opts.DontListen); err != nil {
		return nil, err
	}
	if err := checkFree(opts.Cluster.Host, opts.Cluster.Port, "cluster routes", cfg.ClusterName != ""); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsnode: embedded server: %w", err)
	}
	fatal := make(chan string, 1)
	s.SetLogger(fatalLog(fatal), false, false)
	go s.Start()
	ready := make(chan bool, 1)
	go func() { ready <- s.ReadyForConnections(30 * time.Second) }()
	select {
	case msg := <-fatal:
		// A port taken since free looked, or another failure to start.
		s.Shutdown()
		return nil, fmt.Errorf("natsnode: embedded server: %s", msg)
	case ok := <-ready:
		if !ok {
			s.Shutdown()
			return nil, errors.New("natsnode: embedded server did not become ready in 30s")
		}
	}
	return s, nil
}

// checkFree is free (a variable so that a test can skip it and see the
// server's own refusal).
var checkFree = free

// free checks that the server can listen on host:port (for what), when
// on and port is not a random one: an error naming the address if not.
func free(host string, port int, what string, on bool) error {
	if !on || port <= 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("natsnode: cannot listen on %s for %s: %w", addr, what, err)
	}
	return l.Close()
}

// fatalLog is the embedded server's logger: its fatal messages (it could
// not listen) go to the channel, if there is room; the rest is dropped,
// as with NoLog.
type fatalLog chan<- string

func (l fatalLog) Fatalf(format string, v ...any) {
	select {
	case l <- fmt.Sprintf(format, v...):
	default:
	}
}

func (fatalLog) Noticef(string, ...any) {}
func (fatalLog) Warnf(string, ...any)   {}
func (fatalLog) Errorf(string, ...any)  {}
func (fatalLog) Debugf(string, ...any)  {}
func (fatalLog) Tracef(string, ...any)  {}

// checkStoreAccount refuses a store (the server's JetStream directory)
// whose event stream lives in another account than account, the one the
// node's user is in now: the engine would start over on empty streams
// there. That happens when a store made without accounts (no --auth, or an
// auth file with every user in one account) is opened with docs/auth.conf,
// whose engine account is TIDEMARK, or the other way round.
func checkStoreAccount(storeDir, account string) error {
	has := func(acc string) bool {
		_, err := os.Stat(filepath.Join(storeDir, acc, "streams", events.StreamName))
		return err == nil
	}
	if has(account) {
		return nil
	}
	dirs, err := os.ReadDir(storeDir)
	if err != nil {
		return nil // a new store
	}
	for _, d := range dirs {
		if d.IsDir() && d.Name() != account && has(d.Name()) {
			return fmt.Errorf("natsnode: the store %s holds the event stream in NATS account %q, but the engine's user is in account %q, "+
				"which would start over on empty streams; use the auth file the store was made with, or, for a single server, "+
				"stop it and move %s to %s (see README, Access control)",
				storeDir, d.Name(), account, filepath.Join(storeDir, d.Name()), filepath.Join(storeDir, account))
		}
	}
	return nil
}

func splitHostPort(hp string) (string, int, error) {
	for i := len(hp) - 1; i >= 0; i-- {
		if hp[i] == ':' {
			p, err := strconv.Atoi(hp[i+1:])
			if err != nil {
				return "", 0, fmt.Errorf("natsnode: listen address %q: bad port", hp)
			}
			return hp[:i], p, nil
		}
	}
	return "", 0, fmt.Errorf("natsnode: listen address %q: want HOST:PORT", hp)
}
