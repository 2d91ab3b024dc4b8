package interval

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Range is a half-open time range [Start, End) in UTC.
//
// On the wire (msgpack) a Range is an array of two integers, the Unix
// seconds of Start and End (the codec is internal/msgp's EncodeRange and
// DecodeRange); in JSON and text it is "START/END" in RFC 3339.
type Range struct {
	Start time.Time
	End   time.Time
}

// R builds a Range, normalising both ends to UTC.
func R(start, end time.Time) Range { return Range{Start: start.UTC(), End: end.UTC()} }

// Empty reports whether the range holds no time.
func (r Range) Empty() bool { return !r.Start.Before(r.End) }

// Duration is End - Start.
func (r Range) Duration() time.Duration { return r.End.Sub(r.Start) }

// Overlaps reports whether r and o share any instant.
func (r Range) Overlaps(o Range) bool { return r.Start.Before(o.End) && o.Start.Before(r.End) }

// Intersect returns the common part of r and o (possibly empty).
func (r Range) Intersect(o Range) Range {
	s, e := r.Start, r.End
	if o.Start.After(s) {
		s = o.Start
	}
	if o.End.Before(e) {
		e = o.End
	}
	if !s.Before(e) {
		return Range{Start: s, End: s}
	}
	return Range{Start: s, End: e}
}

// String renders the range as "START/END" in RFC 3339.
func (r Range) String() string {
	return r.Start.UTC().Format(time.RFC3339) + "/" + r.End.UTC().Format(time.RFC3339)
}

// ParseRange parses "START/END" (RFC 3339 both) and requires START < END.
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return Range{}, fmt.Errorf("range %q: want START/END in RFC 3339", s)
	}
	start, err := time.Parse(time.RFC3339, strings.TrimSpace(a))
	if err != nil {
		return Range{}, fmt.Errorf("range %q: start: %w", s, err)
	}
	end, err := time.Parse(time.RFC3339, strings.TrimSpace(b))
	if err != nil {
		return Range{}, fmt.Errorf("range %q: end: %w", s, err)
	}
	r := R(start, end)
	if r.Empty() {
		return Range{}, fmt.Errorf("range %q: end is not after start", s)
	}
	return r, nil
}

// MarshalText implements encoding.TextMarshaler ("START/END").
func (r Range) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Range) UnmarshalText(b []byte) error {
	p, err := ParseRange(string(b))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// Set is a set of time as sorted, disjoint, non-touching ranges. The zero
// value is the empty set. A Set's methods never modify a Set passed to them;
// Add and Subtract return a new Set.
type Set []Range

// NewSet builds a normalised Set from any ranges (overlapping, touching,
// unsorted or empty ones are fine). It is nil when no range holds time.
// O(m log m) for m ranges; rs is not modified.
func NewSet(rs ...Range) Set { return normalize(rs) }

// normalize copies rs into a Set: ranges in UTC, empty ones dropped, sorted
// and merged where they overlap or touch; nil when nothing is left.
func normalize(rs []Range) Set {
	if isNormal(rs) {
		if len(rs) == 0 {
			return nil
		}
		return append(make(Set, 0, len(rs)), rs...)
	}
	// Sort and merge plain integers (no pointers to move or compare).
	tmp := make([]span, 0, len(rs))
	for _, r := range rs {
		if !r.Empty() {
			tmp = append(tmp, span{r.Start.Unix(), r.End.Unix(), int32(r.Start.Nanosecond()), int32(r.End.Nanosecond())})
		}
	}
	if len(tmp) == 0 {
		return nil
	}
	slices.SortFunc(tmp, func(a, b span) int {
		if c := cmp.Compare(a.s, b.s); c != 0 {
			return c
		}
		return cmp.Compare(a.sn, b.sn)
	})
	merged := tmp[:1]
	for _, x := range tmp[1:] {
		last := &merged[len(merged)-1]
		if x.s > last.e || (x.s == last.e && x.sn > last.en) {
			merged = append(merged, x)
		} else if x.e > last.e || (x.e == last.e && x.en > last.en) {
			last.e, last.en = x.e, x.en
		}
	}
	out := make(Set, len(merged))
	for i, x := range merged {
		out[i] = Range{Start: time.Unix(x.s, int64(x.sn)).UTC(), End: time.Unix(x.e, int64(x.en)).UTC()}
	}
	return out
}

// span is a Range as integers: Unix seconds and nanoseconds of each end.
type span struct {
	s, e   int64
	sn, en int32
}

// isNormal reports whether rs already has a Set's shape: non-empty UTC
// ranges, sorted, disjoint and not touching. O(m).
func isNormal(rs []Range) bool {
	for i, r := range rs {
		if r.Empty() || r.Start.Location() != time.UTC || r.End.Location() != time.UTC ||
			(i > 0 && !rs[i-1].End.Before(r.Start)) {
			return false
		}
	}
	return true
}

// asSet is o itself when it is normalised, else a normalised copy: the
// Set methods accept any ranges as their argument (an event's ranges as
// decoded, say), as folding Add or Subtract over them would.
func asSet(o Set) Set {
	if isNormal(o) {
		return o
	}
	return normalize(o)
}

// gallop returns the first index k in [lo, n) for which before(k) is false
// (n if none), where before is true on a prefix: an exponential then a
// binary search from lo, O(log(k - lo)).
func gallop(n, lo int, before func(int) bool) int {
	hi, step := lo, 1
	for hi < n && before(hi) {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, n)
	return lo + sort.Search(hi-lo, func(k int) bool { return !before(lo + k) })
}

// Ranges returns the set's ranges (shared; do not modify).
func (s Set) Ranges() []Range { return s }

// Empty reports whether the set holds no time.
func (s Set) Empty() bool { return len(s) == 0 }

// Frontier is the end of the last range, or the zero time for an empty set.
func (s Set) Frontier() time.Time {
	if len(s) == 0 {
		return time.Time{}
	}
	return s[len(s)-1].End
}

// Start is the start of the first range, or the zero time for an empty set.
func (s Set) Start() time.Time {
	if len(s) == 0 {
		return time.Time{}
	}
	return s[0].Start
}

// Add returns s ∪ r.
func (s Set) Add(r Range) Set {
	r = R(r.Start, r.End)
	if r.Empty() {
		return s
	}
	// first range whose end >= r.Start (touching merges)
	i := sort.Search(len(s), func(i int) bool { return !s[i].End.Before(r.Start) })
	// first range whose start > r.End
	j := sort.Search(len(s), func(j int) bool { return s[j].Start.After(r.End) })
	out := make(Set, 0, len(s)-(j-i)+1)
	out = append(out, s[:i]...)
	if i < j {
		if s[i].Start.Before(r.Start) {
			r.Start = s[i].Start
		}
		if s[j-1].End.After(r.End) {
			r.End = s[j-1].End
		}
	}
	out = append(out, r)
	out = append(out, s[j:]...)
	return out
}

// AddSet returns s ∪ o in one merge: each range of o is placed by a
// galloping search from where the previous one ended, and the ranges of s
// between them are copied in blocks, so it is O(m log(n/m) + n) for m
// ranges into n (one range: a binary search and a copy, as Add). o may be
// any ranges, normalised or not.
func (s Set) AddSet(o Set) Set {
	o = asSet(o)
	if len(o) == 0 {
		return s
	}
	out := make(Set, 0, len(s)+len(o))
	p := 0 // the ranges of s before p are in out
	for q := 0; q < len(o); {
		cur := o[q]
		q++
		// The ranges of s that end before cur starts (not touching it).
		i := gallop(len(s), p, func(k int) bool { return s[k].End.Before(cur.Start) })
		out = append(out, s[p:i]...)
		p = i
		// Absorb every range of s or o that overlaps or touches cur.
		for {
			if p < len(s) && !s[p].Start.After(cur.End) {
				if s[p].Start.Before(cur.Start) {
					cur.Start = s[p].Start
				}
				if s[p].End.After(cur.End) {
					cur.End = s[p].End
				}
				p++
				continue
			}
			if q < len(o) && !o[q].Start.After(cur.End) {
				if o[q].End.After(cur.End) {
					cur.End = o[q].End
				}
				q++
				continue
			}
			break
		}
		out = append(out, cur)
	}
	return append(out, s[p:]...)
}

// Subtract returns s \ r.
func (s Set) Subtract(r Range) Set {
	r = R(r.Start, r.End) // the pieces it cuts stay in UTC
	if r.Empty() || len(s) == 0 {
		return s
	}
	// first range that ends after r.Start
	i := sort.Search(len(s), func(i int) bool { return s[i].End.After(r.Start) })
	// first range that starts at or after r.End
	j := sort.Search(len(s), func(j int) bool { return !s[j].Start.Before(r.End) })
	if i >= j {
		return s
	}
	out := make(Set, 0, len(s)+1)
	out = append(out, s[:i]...)
	if s[i].Start.Before(r.Start) {
		out = append(out, Range{Start: s[i].Start, End: r.Start})
	}
	if s[j-1].End.After(r.End) {
		out = append(out, Range{Start: r.End, End: s[j-1].End})
	}
	out = append(out, s[j:]...)
	return out
}

// SubtractSet returns s \ o in one merge, O((n + m) log) at worst and a
// copy of the untouched blocks of s. o may be any ranges. Like a fold of
// Subtract, it returns s itself when o takes nothing away.
func (s Set) SubtractSet(o Set) Set {
	if len(s) == 0 {
		return s
	}
	o = asSet(o)
	var out Set // nil until something is taken away
	p, q := 0, 0
	for p < len(s) && q < len(o) {
		// Skip the ranges of o that end at or before s[p] starts.
		q = gallop(len(o), q, func(k int) bool { return !o[k].End.After(s[p].Start) })
		if q == len(o) {
			break
		}
		// The ranges of s that end at or before o[q] starts are kept whole.
		if i := gallop(len(s), p, func(k int) bool { return !s[k].End.After(o[q].Start) }); i > p {
			if out != nil {
				out = append(out, s[p:i]...)
			}
			p = i
			continue
		}
		// s[p] overlaps o[q]: cut every range of o that overlaps it out of it.
		if out == nil {
			out = append(make(Set, 0, len(s)+len(o)), s[:p]...)
		}
		x, cur := s[p], s[p].Start
		for k := q; k < len(o) && o[k].Start.Before(x.End); k++ {
			if o[k].Start.After(cur) {
				out = append(out, Range{Start: cur, End: o[k].Start})
			}
			if o[k].End.After(cur) {
				cur = o[k].End
			}
		}
		if cur.Before(x.End) {
			out = append(out, Range{Start: cur, End: x.End})
		}
		p++
	}
	if out == nil {
		return s
	}
	return append(out, s[p:]...)
}

// Clip returns s ∩ w.
func (s Set) Clip(w Range) Set {
	if w.Empty() {
		return nil
	}
	var out Set
	i := sort.Search(len(s), func(i int) bool { return s[i].End.After(w.Start) })
	for ; i < len(s) && s[i].Start.Before(w.End); i++ {
		out = append(out, s[i].Intersect(w))
	}
	return out
}

// Missing returns the parts of window w that s does not cover.
func (s Set) Missing(w Range) Set {
	if w.Empty() {
		return nil
	}
	// The gaps between the ranges inside w, counted first so that the
	// result is allocated once: a promotion check keeps one per candidate,
	// and the copies of a growing slice were most of its garbage.
	i := sort.Search(len(s), func(i int) bool { return s[i].End.After(w.Start) })
	n := s.gaps(i, w, nil)
	if n == 0 {
		return nil
	}
	out := make(Set, 0, n)
	s.gaps(i, w, &out)
	return out
}

// gaps counts the gaps in w between s's ranges from index i on, and
// appends them to out unless out is nil.
func (s Set) gaps(i int, w Range, out *Set) int {
	n, cur := 0, w.Start
	for ; i < len(s) && s[i].Start.Before(w.End); i++ {
		if s[i].Start.After(cur) {
			n++
			if out != nil {
				*out = append(*out, R(cur, s[i].Start))
			}
		}
		if s[i].End.After(cur) {
			cur = s[i].End
		}
	}
	if cur.Before(w.End) {
		n++
		if out != nil {
			*out = append(*out, R(cur, w.End))
		}
	}
	return n
}

// Covers reports whether s covers all of r.
func (s Set) Covers(r Range) bool {
	if r.Empty() {
		return true
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].End.After(r.Start) })
	return i < len(s) && !s[i].Start.After(r.Start) && !s[i].End.Before(r.End)
}

// Overlaps reports whether s shares any instant with r.
func (s Set) Overlaps(r Range) bool {
	if r.Empty() {
		return false
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].End.After(r.Start) })
	return i < len(s) && s[i].Start.Before(r.End)
}

// OverlapsSet reports whether s and o share any instant.
func (s Set) OverlapsSet(o Set) bool {
	for _, r := range o {
		if s.Overlaps(r) {
			return true
		}
	}
	return false
}

// IsSuffix reports whether s (non-empty) is one contiguous range that ends at
// end: the shape a trailing gap must have.
func (s Set) IsSuffix(end time.Time) bool {
	return len(s) == 1 && s[0].End.Equal(end)
}

// Equal reports whether s and o hold the same time.
func (s Set) Equal(o Set) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if !s[i].Start.Equal(o[i].Start) || !s[i].End.Equal(o[i].End) {
			return false
		}
	}
	return true
}

// Strings renders every range as "START/END".
func (s Set) Strings() []string {
	out := make([]string, len(s))
	for i, r := range s {
		out[i] = r.String()
	}
	return out
}

// String renders the set as a comma-separated list of ranges.
func (s Set) String() string { return "[" + strings.Join(s.Strings(), ", ") + "]" }

// Split cuts each range of s into aligned unit intervals.
func (s Set) Split(u Unit) []Range {
	var out []Range
	for _, r := range s {
		for t := r.Start; t.Before(r.End); {
			n := u.Add(t, 1)
			if n.After(r.End) {
				n = r.End
			}
			out = append(out, Range{Start: t, End: n})
			t = n
		}
	}
	return out
}

// Batches splits ranges into the batches they are computed in, in order:
// each range is cut after every size whole intervals of unit from its
// start (its last batch may be shorter, or end in a partial interval);
// size 0 leaves each range one batch (SQLMesh: no batch_size, the whole
// missing range at once).
func Batches(unit Unit, size int, ranges []Range) []Range {
	var out []Range
	for _, r := range ranges {
		if size <= 0 {
			out = append(out, r)
			continue
		}
		for s := r.Start; s.Before(r.End); {
			e := unit.Add(unit.Floor(s), size)
			if e.After(r.End) {
				e = r.End
			}
			out = append(out, R(s, e))
			s = e
		}
	}
	return out
}
