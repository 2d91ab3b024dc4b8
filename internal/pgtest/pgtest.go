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
// and DSN(t) in each test that needs a database. The server itself is
// internal/pgserver's. Importers: tests only.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidemark/tidemark/internal/pgserver"

	// The Postgres driver ("pgx") for database/sql.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// The private server of this test binary.
var (
	pgOnce sync.Once
	pgSrv  *pgserver.Server
	pgErr  error // why Postgres is unavailable (the tests skip)
	pgDBs  atomic.Int64
)

// Main runs the package's tests, then stops the server if one started.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server and removes its directory (Main calls it; a
// TestMain that does more may call it itself, once, after m.Run).
func Stop() {
	if pgSrv != nil {
		if err := pgSrv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

func startPostgres() { pgSrv, pgErr = pgserver.Start(context.Background(), "") }

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
	admin, err := sql.Open("pgx", pgSrv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return pgSrv.DSN(name)
}
