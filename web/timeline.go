package web

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Timeline geometry.
const (
	tlWidth  = 320
	tlHeight = 18
)

// windows are the time windows the coverage bars may show (?window=),
// the first the default.
var windows = []struct {
	Name string
	Span time.Duration // 0: all, from the earliest incumbent's start
}{{"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}, {"all", 0}}

// errWindow answers an unknown ?window= value.
type errWindow string

func (e errWindow) Error() string {
	return fmt.Sprintf("window %q: want 24h, 7d or all", string(e))
}

// windowOf reads ?window= (default 24h).
func windowOf(q url.Values) (string, error) {
	w := q.Get("window")
	if w == "" {
		return windows[0].Name, nil
	}
	for _, x := range windows {
		if x.Name == w {
			return w, nil
		}
	}
	return "", errWindow(w)
}

// axis is the one time range every coverage bar of a page spans: the
// window ending at the page's clock, or, for "all", from the earliest
// start of an incumbent shown.
type axis struct {
	Window     string
	Start, End time.Time
}

// newAxis is the axis of window at now over the incumbents of st's envs.
// A frontier past now (a clock behind the stream's) moves the end to it.
func newAxis(st *projections.State, window string, now time.Time) axis {
	a := axis{Window: window, End: now}
	var first time.Time
	for _, e := range st.Envs {
		for _, id := range e.Incumbents {
			sn, ok := st.Snapshots[id]
			if !ok {
				continue
			}
			if s := sn.Schedule.Unit().Floor(sn.Start); first.IsZero() || s.Before(first) {
				first = s
			}
			if f := st.Table(sn.Table).Frontier(); f.After(a.End) {
				a.End = f
			}
		}
	}
	for _, x := range windows {
		if x.Name == window && x.Span > 0 {
			a.Start = a.End.Add(-x.Span)
			return a
		}
	}
	a.Start = first
	if a.Start.IsZero() || !a.Start.Before(a.End) {
		a.Start = a.End.Add(-24 * time.Hour)
	}
	return a
}

func (a axis) x(t time.Time) float64 {
	return float64(t.Sub(a.Start)) / float64(a.End.Sub(a.Start)) * tlWidth
}

// Links are the window choices, each a link to the page with it.
func (a axis) Links() []windowLink {
	var out []windowLink
	for _, x := range windows {
		out = append(out, windowLink{Name: x.Name, Current: x.Name == a.Window})
	}
	return out
}

type windowLink struct {
	Name    string
	Current bool
}

// SVG is the axis itself: its start, middle and end, compact.
func (a axis) SVG() template.HTML {
	mid := a.Start.Add(a.End.Sub(a.Start) / 2)
	return template.HTML(fmt.Sprintf(`<svg class="axis" width="%d" height="12" viewBox="0 0 %d 12" role="img" aria-label="time axis %s to %s">`+
		`<text x="0" y="10">%s</text><text x="%d" y="10" text-anchor="middle">%s</text><text x="%d" y="10" text-anchor="end">%s</text></svg>`,
		tlWidth, tlWidth, a.Start.UTC().Format(time.RFC3339), a.End.UTC().Format(time.RFC3339),
		short(a.Start, a), tlWidth/2, short(mid, a), tlWidth, short(a.End, a)))
}

// short is a compact time for an axis label: "15:04" within a day's
// window, "01-02 15:04" within a year, else "2006-01-02".
func short(t time.Time, a axis) string {
	t = t.UTC()
	switch d := a.End.Sub(a.Start); {
	case d <= 24*time.Hour:
		return t.Format("15:04")
	case d <= 366*24*time.Hour:
		return t.Format("01-02 15:04")
	}
	return t.Format("2006-01-02")
}

// timeline draws a snapshot's coverage on the page's axis as an SVG
// strip: computed ranges, missing ranges (ready and not computed), open
// repair debt, repaired (closed) debt, the frontier and the readiness
// frontier. Time not yet ready, or before the snapshot's start, is
// background.
func timeline(st *projections.State, snapshot string, a axis) template.HTML {
	sn, ok := st.Snapshots[snapshot]
	if !ok {
		return ""
	}
	cov := st.Table(sn.Table)
	span := interval.R(a.Start, a.End)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="coverage of %s" data-start="%s" data-end="%s">`,
		tlWidth, tlHeight, tlWidth, tlHeight, html.EscapeString(snapshot), a.Start.UTC().Format(time.RFC3339), a.End.UTC().Format(time.RFC3339))
	rect := func(r interval.Range, class string, y, h int) {
		r = r.Intersect(span)
		if r.Empty() {
			return
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s %s</title></rect>`,
			class, a.x(r.Start), y, a.x(r.End)-a.x(r.Start), h, class, html.EscapeString(r.String()))
	}
	rect(span, "bg", 0, tlHeight)
	for _, r := range cov.Clip(span) {
		rect(r, "covered", 0, tlHeight)
	}
	if ready := sn.Schedule.Ready(sn.Start, a.End); !ready.Empty() {
		for _, r := range cov.Missing(ready) {
			rect(r, "missing", 0, tlHeight)
		}
		line(&b, a, ready.End, "ready", "readiness frontier")
	}
	for _, d := range st.Repairs {
		if d.Table != sn.Table {
			continue
		}
		class := "repaired"
		if d.Open() {
			class = "debt"
		}
		for _, r := range d.Ranges {
			rect(r, class, tlHeight-5, 5)
		}
	}
	if f := cov.Frontier(); !f.IsZero() {
		line(&b, a, f, "frontier", "frontier")
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// line marks t on the strip (nothing when t is outside the axis).
func line(b *strings.Builder, a axis, t time.Time, class, what string) {
	if t.Before(a.Start) || t.After(a.End) {
		return
	}
	x := a.x(t)
	fmt.Fprintf(b, `<line class="%s" x1="%.1f" x2="%.1f" y1="0" y2="%d"><title>%s %s</title></line>`, class, x, x, tlHeight, what, t.UTC().Format(time.RFC3339))
}
