package warehouse

import (
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
