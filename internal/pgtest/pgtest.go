// Package pgtest gives tests a private PostgreSQL server: started on first
// use by a test binary (initdb + pg_ctl in a temporary directory, listening
// only on a unix socket there, fsync off), one fresh database per DSN call,
// stopped by Main. Tests skip with the reason when Postgres cannot run here
// (no initdb/pg_ctl, or running as root without a postgres user), unless
// TIDEMARK_REQUIRE_POSTGRES=1 (CI), which makes that a failure.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and DSN(t) in each test that needs a database. Importers: tests only.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	// The Postgres driver ("pgx") for database/sql.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// The private server of this test binary.
var (
	pgOnce    sync.Once
	pgDir     string
	pgPort    int
	pgRunAs   []string // command prefix that runs a binary as the cluster owner
	pgBin     string
	pgErr     error // why Postgres is unavailable (the tests skip)
	pgStarted bool
	pgDBs     atomic.Int64
)

// Main runs the package's tests, then stops the server if one started.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server and removes its directory (Main calls it; a
// TestMain that does more may call it itself, once, after m.Run).
func Stop() { stopPostgres() }

// findPostgresBin finds the directory of initdb and pg_ctl.
func findPostgresBin() (string, error) {
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
	return "", fmt.Errorf("initdb/pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin")
}

func pgCmd(name string, args ...string) *exec.Cmd {
	full := append(append([]string{}, pgRunAs...), append([]string{filepath.Join(pgBin, name)}, args...)...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

func startPostgres() {
	var err error
	if pgBin, err = findPostgresBin(); err != nil {
		pgErr = err
		return
	}
	if pgDir, err = os.MkdirTemp("", "tidemark-pg-"); err != nil {
		pgErr = err
		return
	}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the server as "postgres".
		u, err := user.Lookup("postgres")
		if err != nil {
			pgErr = fmt.Errorf("running as root and there is no postgres user to own the cluster: %w", err)
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(pgDir, uid, gid); err != nil {
			pgErr = err
			return
		}
		if p, err := exec.LookPath("runuser"); err == nil {
			pgRunAs = []string{p, "-u", "postgres", "--"}
		} else if p, err := exec.LookPath("setpriv"); err == nil {
			pgRunAs = []string{p, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--"}
		} else {
			pgErr = fmt.Errorf("running as root and neither runuser nor setpriv is available")
			return
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pgErr = err
		return
	}
	pgPort = l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(pgDir, "data")
	if out, err := pgCmd("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync").CombinedOutput(); err != nil {
		pgErr = fmt.Errorf("initdb: %v\n%s", err, out)
		return
	}
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off", pgDir, pgPort)
	cmd := pgCmd("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(pgDir, "log"), "-w", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(pgDir, "log"))
		pgErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
		return
	}
	pgStarted = true
}

func stopPostgres() {
	if pgStarted {
		if out, err := pgCmd("pg_ctl", "-D", filepath.Join(pgDir, "data"), "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "pg_ctl stop: %v\n%s", err, out)
		}
	}
	if pgDir != "" {
		os.RemoveAll(pgDir)
	}
}

func pgDSN(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, pgDir, pgPort)
}

// Required reports whether the environment demands Postgres tests run
// (TIDEMARK_REQUIRE_POSTGRES=1): DSN then fails instead of skipping.
func Required() bool { return os.Getenv("TIDEMARK_REQUIRE_POSTGRES") == "1" }

// DSN returns the postgres:// URL of a fresh, empty database on the
// private server (started on first use), or skips t when Postgres cannot
// run here. The database is dropped with the server.
func DSN(t testing.TB) string {
	t.Helper()
	pgOnce.Do(startPostgres)
	if pgErr != nil {
		if Required() {
			t.Fatalf("TIDEMARK_REQUIRE_POSTGRES=1 but no private Postgres: %v", pgErr)
		}
		t.Skipf("no private Postgres for this test (install postgresql: initdb and pg_ctl): %v", pgErr)
	}
	name := fmt.Sprintf("t%d", pgDBs.Add(1))
	admin, err := sql.Open("pgx", pgDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return pgDSN(name)
}
