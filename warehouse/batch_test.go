package warehouse

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// conflicts reports whether two writes' advisory locks (rangeLocks) make
// them take turns: a key both take, one of them exclusively.
func conflicts(a, b Range) bool {
	ka, sa := rangeLocks("t", a)
	kb, sb := rangeLocks("t", b)
	for i, k := range ka {
		for j, l := range kb {
			if k == l && !(sa[i] && sb[j]) {
				return true
			}
		}
	}
	return false
}

// Writes of overlapping ranges of one table take turns across processes,
// whatever their lengths; disjoint batches aligned to their grid do not.
func TestRangeLocks(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	lengths := []time.Duration{5 * time.Minute, time.Hour, 30 * time.Hour, 168 * time.Hour, 200 * 24 * time.Hour, 3 * 365 * 24 * time.Hour, 40 * 365 * 24 * time.Hour}
	for range 3000 {
		mk := func() Range {
			s := base.Add(time.Duration(rnd.Int64N(int64(20*365*24*time.Hour))) / time.Minute * time.Minute)
			if rnd.IntN(2) == 0 {
				s = base.Add(time.Duration(rnd.IntN(400)) * time.Hour)
			}
			return Range{s, s.Add(lengths[rnd.IntN(len(lengths))])}
		}
		a, b := mk(), mk()
		overlap := a.Start.Before(b.End) && b.Start.Before(a.End)
		if overlap && !conflicts(a, b) {
			t.Fatalf("%v and %v overlap but do not take turns", a, b)
		}
	}
	// A year of hours in batches of 168 from a day's start: neighbours run at once.
	for i := range 52 {
		a := Range{base.Add(time.Duration(i) * 168 * time.Hour), base.Add(time.Duration(i+1) * 168 * time.Hour)}
		b := Range{a.End, a.End.Add(168 * time.Hour)}
		if conflicts(a, b) {
			t.Fatalf("disjoint batches %v and %v take turns", a, b)
		}
	}
	if k, s := rangeLocks("t", Range{base, base.AddDate(1000, 0, 0)}); len(k) != 1 || s[0] {
		t.Fatalf("a millennium: %v %v, want the table exclusively", k, s)
	}
}

// Two warehouses (two worker processes) on one Postgres database write
// overlapping ranges of every size at once, and batches of disjoint
// ranges: the rows are those of one write of the whole range (no
// duplicates), and the writer records do not overlap.
func TestConcurrentRangesTwoProcesses(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		if w.Engine() != "postgres" {
			t.Skip("one process owns a DuckDB file")
		}
		write(t, w, hourly("hourly__full"), full)
		w2, err := Open(t.Context(), w.dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		ranges := []Range{full, {day(0), day(400)}, {day(-3000), day(3000)}, {day(2), day(5)}, {day(3).Add(5 * time.Hour), day(4).Add(7 * time.Hour)}}
		for i := range days {
			ranges = append(ranges, Range{day(i), day(i + 1)})
		}
		var wg sync.WaitGroup
		for g, wh := range []*Warehouse{w, w2, w, w2} {
			wg.Go(func() {
				for i := range ranges {
					r := ranges[(i+g*3)%len(ranges)]
					if _, err := wh.WriteInterval(t.Context(), hourly("hourly__r"), r.Start, r.End); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		sameRows(t, w, "hourly__r", "hourly__full")
		recs, err := w.Writers(t.Context(), "hourly__r")
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].Holds.Start.Before(recs[i-1].Holds.End) {
				t.Fatalf("writer records overlap: %+v and %+v", recs[i-1], recs[i])
			}
		}
	})
}

// A second process's first write of a table that another process is
// writing (its transaction open after its INSERT) neither waits for that
// write nor holds up the table's readers: on the code that adopted the
// table again in every process (ALTER TABLE … OWNER TO, an ACCESS
// EXCLUSIVE lock even when nothing changes), the joining write waited for
// every write in flight, and every reader of the table queued behind it.
func TestJoiningWriterWaitsForNoWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		if w.Engine() != "postgres" {
			t.Skip("one process owns a DuckDB file")
		}
		m := hourly("hourly__j")
		write(t, w, m, Range{day(0), day(1)})
		// Hold the lock a write takes after its INSERT, before it records
		// itself and commits.
		hold, err := w.DB().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Close()
		key := "tidemark.writers:" + m.Table
		if _, err := hold.ExecContext(t.Context(), "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
			t.Fatal(err)
		}
		held := true
		unlock := func() {
			if held {
				held = false
				if _, err := hold.ExecContext(context.Background(), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key); err != nil {
					t.Error(err)
				}
			}
		}
		defer unlock()
		// waiting is the writes (by application name) waiting for a lock,
		// with whether it is key.
		waiting := func() map[string]bool {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			rows, err := w.DB().QueryContext(ctx, `SELECT a.application_name, bool_or(l.locktype = 'advisory' AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0))
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database() GROUP BY 1`, key)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			out := map[string]bool{}
			for rows.Next() {
				var app string
				var onKey bool
				if err := rows.Scan(&app, &onKey); err != nil {
					t.Fatal(err)
				}
				out[app] = onKey
			}
			return out
		}
		until := func(what string, cond func(map[string]bool) bool) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for got := waiting(); !cond(got); got = waiting() {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not within 30s; waiting: %v", what, got)
				}
				time.Sleep(10 * time.Millisecond) // polling pg_locks, bounded by the deadline
			}
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer unlock()
		writeIn := func(dsn string, r Range) {
			wh, err := Open(t.Context(), dsn, Options{})
			if err != nil {
				t.Error(err)
				return
			}
			wg.Go(func() {
				defer wh.Close()
				if _, err := wh.WriteInterval(t.Context(), m, r.Start, r.End); err != nil {
					t.Error(err)
				}
			})
		}
		writeIn(w.dsn+"&application_name=first", Range{day(1), day(3)})
		until("the first write ready to commit", func(got map[string]bool) bool { return got["first"] })
		writeIn(w.dsn+"&application_name=joining", Range{day(3), day(4)})
		until("the joining write at its INSERT's end, beside the others", func(got map[string]bool) bool {
			_, joins := got["joining"]
			if joins && !got["joining"] {
				t.Fatalf("the joining write waits for another's table lock: %v", got)
			}
			return got["joining"]
		})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var n int64
		if err := w.DB().QueryRowContext(ctx, "SELECT count(*) FROM "+qualified(Schema, m.Table)).Scan(&n); err != nil {
			t.Fatalf("a reader of the table while writes are in flight: %v", err)
		}
		unlock()
		wg.Wait()
		write(t, w, hourly("hourly__full"), Range{day(0), day(4)})
		sameRows(t, w, m.Table, "hourly__full")
	})
}
