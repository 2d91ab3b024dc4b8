// Package pgserver runs a private PostgreSQL server: initdb and pg_ctl in
// one directory (its data, log and unix socket), listening only on that
// socket (no TCP: listen_addresses is empty), a random port number, trust
// authentication for the "postgres" user, fsync off. When running as root the server runs as the postgres
// user (through runuser or setpriv), since initdb refuses root.
//
// Importers: internal/pgtest (tests' private server) and bench (the
// Postgres backfill rows). Never a server outside the process's own use.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
)

// ErrUnavailable is wrapped by the errors of Start that mean PostgreSQL
// cannot run here at all: no initdb/pg_ctl, or running as root without a
// postgres user or a way to run a command as it.
var ErrUnavailable = errors.New("PostgreSQL cannot run here")

// Server is a running private server.
type Server struct {
	dir    string   // data, log and socket
	ownDir bool     // Start made dir; Stop removes it
	bin    string   // the directory of initdb and pg_ctl
	runAs  []string // command prefix that runs a binary as the cluster owner
	port   int
}

// Start starts a server in dir (created if missing; its parents must be
// reachable by the postgres user when running as root), or, when dir is
// empty, in a new temporary directory that Stop removes. Its error wraps
// ErrUnavailable when PostgreSQL cannot run here; otherwise it says what
// failed (with initdb's or pg_ctl's output and the server's log).
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if dir == "" {
		if s.dir, err = os.MkdirTemp("", "tidemark-pg-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		if s.ownDir {
			os.RemoveAll(s.dir)
		}
		return nil, err
	}
	return s, nil
}

// findBin finds the directory of initdb and pg_ctl.
func findBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // newest first
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("%w: initdb/pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin", ErrUnavailable)
}

func (s *Server) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	full := append(append([]string{}, s.runAs...), append([]string{filepath.Join(s.bin, name)}, args...)...)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

func (s *Server) start(ctx context.Context) error {
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the server as "postgres".
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("%w: running as root and there is no postgres user to own the cluster: %v", ErrUnavailable, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
		if p, err := exec.LookPath("runuser"); err == nil {
			s.runAs = []string{p, "-u", "postgres", "--"}
		} else if p, err := exec.LookPath("setpriv"); err == nil {
			s.runAs = []string{p, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--"}
		} else {
			return fmt.Errorf("%w: running as root and neither runuser nor setpriv is available", ErrUnavailable)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(s.dir, "data")
	if out, err := s.cmd(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off", s.dir, s.port)
	if out, err := s.cmd(ctx, "pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(s.dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// DSN is the postgres:// URL of database db on the server, as the
// postgres user over its unix socket.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, s.dir, s.port)
}

// Stop stops the server (fast shutdown) and, when Start made its
// directory, removes it. The error is pg_ctl stop's, with its output.
func (s *Server) Stop() error {
	var err error
	if out, e := s.cmd(context.Background(), "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "stop").CombinedOutput(); e != nil {
		err = fmt.Errorf("pg_ctl stop: %v\n%s", e, out)
	}
	if s.ownDir {
		os.RemoveAll(s.dir)
	}
	return err
}
