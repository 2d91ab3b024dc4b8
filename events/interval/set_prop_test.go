package interval

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestSetMatchesBitmap checks Set against a model: a bitmap of 64 hours.
func TestSetMatchesBitmap(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hr := func(i int) time.Time { return base.Add(time.Duration(i) * time.Hour) }
	rapid.Check(t, func(t *rapid.T) {
		var s Set
		var model [64]bool
		ops := rapid.IntRange(1, 40).Draw(t, "ops")
		for i := 0; i < ops; i++ {
			a := rapid.IntRange(0, 63).Draw(t, "a")
			b := rapid.IntRange(a, 64).Draw(t, "b")
			add := rapid.Bool().Draw(t, "add")
			if add {
				s = s.Add(R(hr(a), hr(b)))
			} else {
				s = s.Subtract(R(hr(a), hr(b)))
			}
			for h := a; h < b; h++ {
				model[h] = add
			}
		}
		// normalised: sorted, disjoint, not touching, non-empty ranges
		for i, r := range s {
			if r.Empty() || (i > 0 && !s[i-1].End.Before(r.Start)) {
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
