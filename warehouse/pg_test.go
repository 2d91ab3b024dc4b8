package warehouse

import (
	"testing"

	"github.com/tidemark/tidemark/internal/pgtest"
)

// One private Postgres server for this package's tests (internal/pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }

// newPostgresDSN is a fresh database on it, or skips the test.
func newPostgresDSN(t *testing.T) string { return pgtest.DSN(t) }
