package warehouse

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/pgtest"
)

// BenchmarkWriteInterval is one hourly interval write (DELETE + INSERT of
// the slice and its writer record, one transaction), cycling over 240
// hours of one table, in a warehouse whose writer table already holds
// 100,000 records of other tables.
func BenchmarkWriteInterval(b *testing.B) {
	for _, backend := range []string{"duckdb", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			dsn := b.TempDir() + "/w.duckdb"
			if backend == "postgres" {
				dsn = pgtest.DSN(b)
			}
			w, err := Open(b.Context(), dsn, Options{Threads: 2, MemoryLimit: "512MB"})
			if err != nil {
				b.Skip(err)
			}
			defer w.Close()
			for _, q := range []string{"CREATE SCHEMA raw", `CREATE TABLE raw.page_views AS
				SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL '7 minutes' AS TIMESTAMP) AS ts,
				CAST(i % 13 AS BIGINT) AS user_id, CAST(i % 100 AS DECIMAL(10,2)) / 4 AS amount
				FROM generate_series(0, 1999) AS t(i)`} {
				if _, err := w.DB().ExecContext(b.Context(), q); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.ensureMeta(b.Context()); err != nil {
				b.Fatal(err)
			}
			if _, err := w.DB().ExecContext(b.Context(), fmt.Sprintf(`INSERT INTO %s
				SELECT 'other__' || CAST(i %% 100 AS TEXT), ts, ts + INTERVAL '1 hour', ts, ts + INTERVAL '1 hour', 'other@v1', 'x', 1, ts
				FROM (SELECT i, CAST(TIMESTAMP '2025-01-01 00:00:00' + i * INTERVAL '1 hour' AS TIMESTAMP) AS ts FROM generate_series(0, 99999) AS t(i)) g`,
				qualified(MetaSchema, IntervalsTable))); err != nil {
				b.Fatal(err)
			}
			m := hourly("hourly__bench")
			m.Snapshot = "hourly@v1"
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s := day0.Add(time.Duration(i%240) * time.Hour)
				if _, err := w.WriteInterval(b.Context(), m, s, s.Add(time.Hour)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuery3M is `tidemark query` of 3,000,000 rows: the answer
// stops at the default limits (10,000 rows). It reports the Go heap
// allocated per query and the growth of the process's peak resident set
// (DuckDB's memory included) over the run.
func BenchmarkQuery3M(b *testing.B) {
	for _, backend := range []string{"duckdb", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			dsn := b.TempDir() + "/w.duckdb"
			if backend == "postgres" {
				dsn = pgtest.DSN(b)
			}
			w, err := Open(b.Context(), dsn, Options{})
			if err != nil {
				b.Skip(err)
			}
			defer w.Close()
			before := peakRSS()
			b.ReportAllocs()
			for b.Loop() {
				res, err := w.QueryLimited(b.Context(), "SELECT i, i * 2 AS j FROM generate_series(1, 3000000) AS t(i)", Limits{})
				if err != nil || !res.Truncated || len(res.Rows) != DefaultLimits.Rows {
					b.Fatalf("%d rows, truncated %v: %v", len(res.Rows), res.Truncated, err)
				}
			}
			b.ReportMetric(float64(peakRSS()-before)/(1<<20), "peak-RSS-growth-MiB")
		})
	}
}

// peakRSS is the process's peak resident set in bytes (VmHWM), or 0.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
