package engine

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/tidemark/tidemark/events"
)

// startEmbedded starts an in-process nats-server with JetStream whose store
// lives under dataDir.
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
			return nil, fmt.Errorf("engine: cluster listen: %w", err)
		}
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: host, Port: port}
		for _, r := range cfg.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("engine: route %q: want nats://HOST:PORT", r)
			}
			opts.Routes = append(opts.Routes, u)
		}
		// A cluster member must be reachable by clients of the others.
		opts.DontListen = false
	}
	account := server.DEFAULT_GLOBAL_ACCOUNT // where the engine's streams live
	if cfg.AuthFile != "" {
		fileOpts, err := server.ProcessConfigFile(cfg.AuthFile)
		if err != nil {
			return nil, fmt.Errorf("engine: auth file: %w", err)
		}
		if len(fileOpts.Users) == 0 && len(fileOpts.Nkeys) == 0 {
			return nil, fmt.Errorf("engine: auth file %s defines no users", cfg.AuthFile)
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
			return nil, fmt.Errorf("engine: TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS = tc, true
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("engine: embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("engine: embedded server did not become ready in 30s")
	}
	return s, nil
}

// checkStoreAccount refuses a store (the server's JetStream directory)
// whose event stream lives in another account than account, the one the
// engine's user is in now: the engine would start over on empty streams
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
			return fmt.Errorf("engine: the store %s holds the event stream in NATS account %q, but the engine's user is in account %q, "+
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
				return "", 0, fmt.Errorf("engine: listen address %q: bad port", hp)
			}
			return hp[:i], p, nil
		}
	}
	return "", 0, fmt.Errorf("engine: listen address %q: want HOST:PORT", hp)
}
