package interval

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

var zone = time.FixedZone("UTC+2", 2*60*60)

// TestSetMatchesBitmap checks Set against a model: a bitmap of 64 hours.
func TestSetMatchesBitmap(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hr := func(i int) time.Time { return base.Add(time.Duration(i) * time.Hour) }
	rapid.Check(t, func(t *rapid.T) {
		var s Set
		var model [64]bool
		ops := rapid.IntRange(1, 40).Draw(t, "ops")
		for i := 0; i < ops; i++ {
			add := rapid.Bool().Draw(t, "add")
			// A batch of ranges in any order, overlapping, touching,
			// empty, inverted or in another zone, as a command may carry
			// them: one range goes through Add or Subtract, more through
			// NewSet, AddSet or SubtractSet, checked against a fold of the
			// single-range operation.
			var batch []Range
			for j, n := 0, rapid.IntRange(1, 12).Draw(t, "batch"); j < n; j++ {
				a := rapid.IntRange(0, 63).Draw(t, "a")
				b := rapid.IntRange(a, 64).Draw(t, "b")
				r := R(hr(a), hr(b))
				switch rapid.IntRange(0, 9).Draw(t, "shape") {
				case 0:
					r = Range{Start: r.End, End: r.Start} // inverted: holds nothing
				case 1:
					r = Range{Start: r.Start.In(zone), End: r.End.In(zone)}
				}
				batch = append(batch, r)
				if !r.Empty() {
					for h := a; h < b; h++ {
						model[h] = add
					}
				}
			}
			fold := s
			for _, r := range batch {
				if add {
					fold = fold.Add(r)
				} else {
					fold = fold.Subtract(r)
				}
			}
			if len(batch) == 1 {
				s = fold
				continue
			}
			var got Set
			switch {
			case add && s == nil && rapid.Bool().Draw(t, "newset"):
				got = NewSet(batch...)
			case add:
				got = s.AddSet(batch)
			default:
				got = s.SubtractSet(batch)
			}
			if !got.Equal(fold) || (got == nil) != (fold == nil) {
				t.Fatalf("add %v of %v to %v: got %#v, the fold gives %#v", add, batch, s, got, fold)
			}
			s = got
		}
		// normalised: sorted, disjoint, not touching, non-empty UTC ranges
		for i, r := range s {
			if r.Empty() || (i > 0 && !s[i-1].End.Before(r.Start)) || r.Start.Location() != time.UTC || r.End.Location() != time.UTC {
				t.Fatalf("not normalised: %v", s)
			}
		}
		for h := 0; h < 64; h++ {
			if got := s.Covers(R(hr(h), hr(h+1))); got != model[h] {
				t.Fatalf("hour %d: covered %v, model %v; set %v", h, got, model[h], s)
			}
		}
		a := rapid.IntRange(0, 63).Draw(t, "wa")
		b := rapid.IntRange(a+1, 64).Draw(t, "wb")
		miss := s.Missing(R(hr(a), hr(b)))
		for h := 0; h < 64; h++ {
			want := h >= a && h < b && !model[h]
			if got := miss.Covers(R(hr(h), hr(h+1))); got != want {
				t.Fatalf("missing hour %d: %v want %v (window %d-%d, set %v, missing %v)", h, got, want, a, b, s, miss)
			}
		}
	})
}

// TestMissingAllocatesOnce: a promotion check keeps one Missing per
// candidate, so Missing allocates its result once, at its size, however
// many gaps it finds (growing it by appends was most of the check's
// garbage: docs/performance.md).
func TestMissingAllocatesOnce(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s Set
	for i := 0; i < 100; i++ {
		a := base.Add(time.Duration(2*i) * time.Hour)
		s = s.Add(R(a, a.Add(time.Hour)))
	}
	w := R(base, base.Add(300*time.Hour))
	if got := len(s.Missing(w)); got != 100 {
		t.Fatalf("%d gaps, want 100", got)
	}
	if n := testing.AllocsPerRun(20, func() { s.Missing(w) }); n != 1 {
		t.Fatalf("Missing allocated %v times, want 1", n)
	}
}
