package web

import (
	"fmt"
	"html"
	"html/template"
	"sort"
	"strings"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

// Lineage geometry: a node's box, the gaps between layers and rows.
const (
	lnW, lnH   = 150, 30
	lnGapX     = 50
	lnGapY     = 12
	lnMaxLabel = 22 // runes of a model's name shown in its box
)

// Lineage node states, by precedence: a node shows the first that holds.
const (
	stateFailed = "failed" // its last run was given up and no run computed its ranges since, or it is late for a failure
	stateLate   = "late"
	stateInPlan = "in-plan" // a plan in flight replaces it
	stateOK     = "ok"
)

// nodeState is a model's state in the lineage picture; stands says
// whether its last failure still stands (views.FailureStands).
func nodeState(m commands.ModelStatus, inPlan, stands bool) string {
	switch {
	case m.LateCause == commands.LateFailed || (m.LastFailure != nil && m.LastFailure.Final && stands):
		return stateFailed
	case m.Late:
		return stateLate
	case inPlan:
		return stateInPlan
	}
	return stateOK
}

// lineage draws an env's models as a DAG, left to right: each model in
// the layer one past its deepest upstream (of the models the env
// serves), an edge from each upstream to it, each node coloured by its
// state (nodeState) and titled with it. inPlan names the models a plan
// in flight for the env replaces. Empty for an env without models.
func lineage(st *projections.State, e commands.EnvStatus, inPlan map[string]bool) template.HTML {
	if len(e.Models) == 0 {
		return ""
	}
	in := map[string]commands.ModelStatus{}
	for _, m := range e.Models {
		in[m.Model] = m
	}
	deps := map[string][]string{}
	for _, m := range e.Models {
		if sn, ok := st.Snapshots[m.Snapshot]; ok {
			for _, d := range sn.DependsOn {
				if _, ok := in[d]; ok {
					deps[m.Model] = append(deps[m.Model], d)
				}
			}
		}
	}
	// e.Models is in dependency order: every upstream's layer is known
	// before its downstream's.
	layer := map[string]int{}
	var layers [][]string
	for _, m := range e.Models {
		l := 0
		for _, d := range deps[m.Model] {
			l = max(l, layer[d]+1)
		}
		layer[m.Model] = l
		for len(layers) <= l {
			layers = append(layers, nil)
		}
		layers[l] = append(layers[l], m.Model)
	}
	rows := 0
	pos := map[string][2]int{}
	for l, ms := range layers {
		sort.Strings(ms)
		for r, m := range ms {
			pos[m] = [2]int{l*(lnW+lnGapX) + 1, r*(lnH+lnGapY) + 1}
		}
		rows = max(rows, len(ms))
	}
	w := len(layers)*(lnW+lnGapX) - lnGapX + 2
	h := rows*(lnH+lnGapY) - lnGapY + 2
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="lineage" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="lineage of %s">`, w, h, w, h, html.EscapeString(e.Env))
	for _, m := range e.Models {
		to := pos[m.Model]
		for _, d := range deps[m.Model] {
			from := pos[d]
			x1, y1, x2, y2 := from[0]+lnW, from[1]+lnH/2, to[0], to[1]+lnH/2
			fmt.Fprintf(&b, `<path class="edge" data-from="%s" data-to="%s" d="M%d,%d C%d,%d %d,%d %d,%d"/>`,
				html.EscapeString(d), html.EscapeString(m.Model), x1, y1, x1+lnGapX/2, y1, x2-lnGapX/2, y2, x2, y2)
		}
	}
	for _, m := range e.Models {
		p, state := pos[m.Model], nodeState(m, inPlan[m.Model], views.FailureStands(st, m.Snapshot))
		title := m.Model + " (" + m.Snapshot + "): " + state
		if m.Late && m.LateReason != "" {
			title += ": " + m.LateReason
		}
		label := m.Model
		if r := []rune(label); len(r) > lnMaxLabel {
			label = string(r[:lnMaxLabel-1]) + "…"
		}
		fmt.Fprintf(&b, `<g class="node %s" data-model="%s" data-state="%s"><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="4"/><text x="%d" y="%d">%s</text></g>`,
			state, html.EscapeString(m.Model), state, html.EscapeString(title), p[0], p[1], lnW, lnH, p[0]+8, p[1]+lnH/2+4, html.EscapeString(label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
