package web

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Timeline geometry.
const (
	tlWidth  = 480
	tlHeight = 22
	tlUnits  = 48 // intervals shown, ending at the frontier
)

// timeline draws a snapshot's coverage as an SVG strip: computed ranges,
// missing ranges, open repair debt, repaired (closed) debt, and the
// frontier, over the last tlUnits intervals.
func timeline(st *projections.State, env, snapshot string) template.HTML {
	sn, ok := st.Snapshots[snapshot]
	if !ok {
		return ""
	}
	u := sn.Schedule.Unit()
	cov := st.Table(sn.Table)
	end := cov.Frontier()
	if t := st.Env(env).LastTick[sn.Model]; t.After(end) {
		end = u.Ceil(t)
	}
	start := u.Floor(sn.Start)
	if end.IsZero() || !start.Before(end) {
		return template.HTML(fmt.Sprintf(`<svg class="timeline" width="%d" height="%d" role="img" aria-label="no coverage"><rect width="%d" height="%d" class="empty"/></svg>`, tlWidth, tlHeight, tlWidth, tlHeight))
	}
	if from := u.Add(end, -tlUnits); from.After(start) {
		start = from
	}
	span := interval.R(start, end)
	x := func(t time.Time) float64 { return float64(t.Sub(start)) / float64(end.Sub(start)) * tlWidth }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="coverage of %s">`, tlWidth, tlHeight+12, tlWidth, tlHeight+12, html.EscapeString(snapshot))
	rect := func(r interval.Range, class string, y, h int) {
		r = r.Intersect(span)
		if r.Empty() {
			return
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s %s</title></rect>`,
			class, x(r.Start), y, x(r.End)-x(r.Start), h, class, html.EscapeString(r.String()))
	}
	rect(span, "bg", 0, tlHeight)
	for _, r := range cov.Clip(span) {
		rect(r, "covered", 0, tlHeight)
	}
	for _, r := range cov.Missing(span) {
		rect(r, "missing", 0, tlHeight)
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
			rect(r, class, tlHeight-6, 6)
		}
	}
	fx := x(cov.Frontier())
	fmt.Fprintf(&b, `<line class="frontier" x1="%.1f" x2="%.1f" y1="0" y2="%d"><title>frontier %s</title></line>`, fx, fx, tlHeight, cov.Frontier().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, `<text x="0" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s</text></svg>`,
		tlHeight+11, start.UTC().Format("01-02 15:04"), tlWidth, tlHeight+11, end.UTC().Format("01-02 15:04"))
	return template.HTML(b.String())
}
