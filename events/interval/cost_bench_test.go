package interval

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The cost benchmarks of issue 15 item 8: what a hostile but valid client
// can make one command cost. Goals: a completion of 10,000 ranges, and the
// next completion after 10,000 fragments, each well under 10 ms; the
// advances of a 50-year five-minute gap under 50 ms.

var benchBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fragments is n one-hour ranges with one-hour holes between them:
// [2i h, 2i+1 h), in a random order when shuffled (as a client may send
// them).
func fragments(n, offset int, shuffled bool) []Range {
	rs := make([]Range, n)
	for i := range rs {
		a := benchBase.Add(time.Duration(2*i+offset) * time.Hour)
		rs[i] = R(a, a.Add(time.Hour))
	}
	if shuffled {
		rnd := rand.New(rand.NewPCG(1, 2))
		rnd.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	}
	return rs
}

// BenchmarkAddSet10k is one completion carrying 10,000 ranges as the
// command path handles it: the ranges are normalised (NewSet, in decide),
// merged into the table's coverage (AddSet) to find the repairs it
// closes, and the coverage is widened to whole intervals (Work).
func BenchmarkAddSet10k(b *testing.B) {
	hour := MustSchedule("@hourly", "", false)
	completion := fragments(10_000, 1, true) // fills the holes of base
	base := NewSet(fragments(10_000, 0, false)...)
	b.Run("into-empty", func(b *testing.B) {
		for b.Loop() {
			set := NewSet(completion...)
			_ = Set(nil).AddSet(set)
			_ = hour.Work(set)
		}
	})
	b.Run("into-10k-fragments", func(b *testing.B) {
		for b.Loop() {
			set := NewSet(completion...)
			if got := base.AddSet(set); len(got) != 1 {
				b.Fatalf("%d ranges", len(got))
			}
		}
	})
	// The next completion of one range after 10,000 fragments.
	next := R(benchBase.Add(5_001*time.Hour), benchBase.Add(5_002*time.Hour))
	b.Run("one-after-10k-fragments", func(b *testing.B) {
		for b.Loop() {
			_ = base.AddSet(NewSet(next))
		}
	})
	// Invalidating 10,000 ranges out of 10,000 fragments.
	b.Run("subtract-10k-from-10k", func(b *testing.B) {
		for b.Loop() {
			_ = base.SubtractSet(NewSet(completion...))
		}
	})
}

// BenchmarkAdvances50y counts the scheduler advances of a 50-year trailing
// gap of a five-minute model (5.26 million ticks), and its readiness
// frontier at the end.
func BenchmarkAdvances50y(b *testing.B) {
	end := benchBase.AddDate(50, 0, 0)
	for _, c := range []struct {
		name     string
		cron     string
		unit     Unit
		partials bool
	}{
		{"five-minute", "*/5 * * * *", "", false},
		{"five-minute-partials", "*/5 * * * *", Hour, true},
		{"weekdays-office-hours", "*/5 9-17 * * 1-5", "", false},
		{"first-of-month-day-unit", "0 0 1 * *", Day, false},
	} {
		s := MustSchedule(c.cron, c.unit, c.partials)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if s.Advances(benchBase, end) == 0 {
					b.Fatal("no advances")
				}
				_ = s.ReadyFrontier(end)
			}
		})
	}
}

// BenchmarkPrevSparse is the newest tick before a time for a cron that
// fires often but on few days (every five minutes in January).
func BenchmarkPrevSparse(b *testing.B) {
	s := MustSchedule("*/5 * * 1 *", "", false)
	at := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		if s.Prev(at).IsZero() {
			b.Fatal("no tick")
		}
	}
}

// BenchmarkUnitCount50y counts the five-minute intervals of 50 years.
func BenchmarkUnitCount50y(b *testing.B) {
	r := R(benchBase, benchBase.AddDate(50, 0, 0))
	for b.Loop() {
		if FiveMinute.Count(r) == 0 {
			b.Fatal("none")
		}
	}
}
