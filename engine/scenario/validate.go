package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

var modelKeys = []string{"name", "cron", "interval_unit", "lookback", "kind", "allow_partials", "start", "depends_on"}

var stepKinds = []string{"deploy", "plan", "backfill", "run_scheduler", "complete", "invalidate", "promote", "replay"}

var expectKeys = []string{"outcome", "codes", "missing", "advances", "repairs_open", "divergences", "incumbent", "scheduled"}

// checker carries what validation knows while walking the steps in order.
type checker struct {
	clock    time.Time
	versions map[string]Model // snapshot id -> definition
	plans    map[string]bool
}

func (p *parser) parseFile(raw any) (*File, error) {
	top, err := p.object("", raw)
	if err != nil {
		return nil, err
	}
	if err := p.only(top, "name", "clock", "models", "steps"); err != nil {
		return nil, err
	}
	f := &File{Path: p.file, Models: map[string]Model{}}
	if f.Name, err = p.str(top, "name", true); err != nil {
		return nil, err
	}
	if f.Clock, err = p.tm(top, "clock", true); err != nil {
		return nil, err
	}
	models, err := p.list("models", top.vals["models"])
	if err != nil {
		return nil, err
	}
	if len(models) == 0 {
		return nil, p.errf("models", "at least one model is required")
	}
	for i, mv := range models {
		path := fmt.Sprintf("models[%d]", i)
		mo, err := p.object(path, mv)
		if err != nil {
			return nil, err
		}
		if err := p.only(mo, modelKeys...); err != nil {
			return nil, err
		}
		name, err := p.str(mo, "name", true)
		if err != nil {
			return nil, err
		}
		if !events.ValidName(name) {
			return nil, p.errf(path+".name", "%q: use letters, digits, '_' and '-'", name)
		}
		if _, dup := f.Models[name]; dup {
			return nil, p.errf(path+".name", "model %q is defined twice", name)
		}
		m := Model{Name: name}
		if err := p.modelFields(mo, &m, true); err != nil {
			return nil, err
		}
		f.Models[name] = m
		f.Order = append(f.Order, name)
	}
	for i, name := range f.Order {
		for j, d := range f.Models[name].DependsOn {
			if _, ok := f.Models[d]; !ok {
				return nil, p.errf(fmt.Sprintf("models[%d].depends_on[%d]", i, j), "unknown model %q", d)
			}
		}
	}
	for i, name := range f.Order {
		if err := p.checkModel(fmt.Sprintf("models[%d]", i), f.Models[name]); err != nil {
			return nil, err
		}
	}
	steps, err := p.list("steps", top.vals["steps"])
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return nil, p.errf("steps", "at least one step is required")
	}
	ck := &checker{clock: f.Clock, versions: map[string]Model{}, plans: map[string]bool{}}
	for i, sv := range steps {
		st, err := p.step(f, ck, i+1, sv)
		if err != nil {
			return nil, err
		}
		f.Steps = append(f.Steps, st)
	}
	return f, nil
}

// modelFields reads the model fields present in mo into m.
func (p *parser) modelFields(mo *obj, m *Model, top bool) error {
	var err error
	if cron, err := p.str(mo, "cron", top); err != nil {
		return err
	} else if cron != "" {
		m.Cron = cron
	}
	if u, err := p.str(mo, "interval_unit", false); err != nil {
		return err
	} else if u != "" {
		unit, err := interval.ParseUnit(u)
		if err != nil {
			return p.errf(join(mo.path, "interval_unit"), "%v", err)
		}
		m.IntervalUnit = unit
	}
	if n, ok, err := p.integer(mo, "lookback"); err != nil {
		return err
	} else if ok {
		if err := commands.CheckLookback(n); err != nil {
			return p.errf(join(mo.path, "lookback"), "%s", err.(*commands.Error).Message)
		}
		m.Lookback = n
	}
	if k, err := p.str(mo, "kind", false); err != nil {
		return err
	} else if k != "" {
		switch events.Kind(k) {
		case events.Incremental, events.ForwardOnly:
			m.Kind = events.Kind(k)
		default:
			return p.errf(join(mo.path, "kind"), "%q: want incremental or forward_only", k)
		}
	}
	if _, ok := mo.vals["allow_partials"]; ok {
		if m.AllowPartials, err = p.boolean(mo, "allow_partials", false); err != nil {
			return err
		}
	}
	if _, ok := mo.vals["start"]; ok || top {
		if m.Start, err = p.tm(mo, "start", top); err != nil {
			return err
		}
	}
	if _, ok := mo.vals["depends_on"]; ok {
		if m.DependsOn, err = p.strList(mo, "depends_on"); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) checkModel(path string, m Model) error {
	sched, err := interval.NewSchedule(m.Cron, m.IntervalUnit, m.AllowPartials)
	if err != nil {
		field := "cron"
		if strings.Contains(err.Error(), "interval unit") {
			field = "interval_unit"
		}
		return p.errf(join(path, field), "%v", err)
	}
	if !sched.Unit().Aligned(m.Start) {
		return p.errf(join(path, "start"), "%s is not aligned to the %s unit", m.Start.Format(time.RFC3339), sched.Unit())
	}
	for i, d := range m.DependsOn {
		if d == m.Name {
			return p.errf(fmt.Sprintf("%s.depends_on[%d]", path, i), "a model cannot depend on itself")
		}
	}
	return nil
}

func (p *parser) step(f *File, ck *checker, n int, raw any) (Step, error) {
	path := fmt.Sprintf("step %d", n)
	so, err := p.object(path, raw)
	if err != nil {
		return Step{}, err
	}
	st := Step{Num: n, Finalize: true}
	var kinds []string
	for _, k := range so.keys {
		if k == "expect" {
			continue
		}
		kinds = append(kinds, k)
	}
	if len(kinds) != 1 {
		return Step{}, p.errf(path, "a step has exactly one of %s (plus optional expect), got %v", strings.Join(stepKinds, ", "), kinds)
	}
	st.Kind = kinds[0]
	known := false
	for _, k := range stepKinds {
		known = known || k == st.Kind
	}
	if !known {
		return Step{}, p.errf(join(path, st.Kind), "unknown step %q (want one of %s)", st.Kind, strings.Join(stepKinds, ", "))
	}
	body, err := p.object(join(path, st.Kind), so.vals[st.Kind])
	if err != nil {
		return Step{}, err
	}
	switch st.Kind {
	case "deploy", "plan":
		allowed := []string{"env", "versions"}
		if st.Kind == "plan" {
			allowed = append(allowed, "id", "max_trailing_gap_advances", "max_catch_up_advances")
		}
		if err := p.only(body, allowed...); err != nil {
			return st, err
		}
		if st.Env, err = p.name(body, "env"); err != nil {
			return st, err
		}
		if st.Versions, err = p.versions(f, body); err != nil {
			return st, err
		}
		for _, v := range st.Versions {
			ck.versions[events.SnapshotID(v.Model.Name, v.Name)] = v.Model
		}
		if st.Kind == "plan" {
			if st.Plan, err = p.name(body, "id"); err != nil {
				return st, err
			}
			if ck.plans[st.Plan] {
				return st, p.errf(join(body.path, "id"), "plan %q is built twice", st.Plan)
			}
			ck.plans[st.Plan] = true
			if st.MaxTrailingGapAdvances, _, err = p.integer(body, "max_trailing_gap_advances"); err != nil {
				return st, err
			}
			if st.MaxCatchUpAdvances, _, err = p.integer(body, "max_catch_up_advances"); err != nil {
				return st, err
			}
		}
	case "backfill":
		if err := p.only(body, "plan", "through"); err != nil {
			return st, err
		}
		if st.Plan, err = p.planRef(ck, body); err != nil {
			return st, err
		}
		if st.Through, err = p.tm(body, "through", false); err != nil {
			return st, err
		}
	case "run_scheduler":
		if err := p.only(body, "env", "until", "worker", "generation"); err != nil {
			return st, err
		}
		if n, ok, err := p.integer(body, "generation"); err != nil {
			return st, err
		} else if ok {
			if n < 1 {
				return st, p.errf(join(body.path, "generation"), "%d: an environment generation is >= 1", n)
			}
			st.Generation = uint64(n)
		}
		if st.Env, err = p.name(body, "env"); err != nil {
			return st, err
		}
		if st.Until, err = p.tm(body, "until", true); err != nil {
			return st, err
		}
		if st.Until.Before(ck.clock) {
			return st, p.errf(join(body.path, "until"), "%s is before the clock %s", st.Until.Format(time.RFC3339), ck.clock.Format(time.RFC3339))
		}
		w, err := p.str(body, "worker", false)
		if err != nil {
			return st, err
		}
		switch w {
		case "", "running":
		case "paused":
			st.WorkerPaused = true
		default:
			return st, p.errf(join(body.path, "worker"), "%q: want paused or running", w)
		}
		ck.clock = st.Until
	case "complete", "invalidate":
		if err := p.only(body, "model", "version", "intervals"); err != nil {
			return st, err
		}
		if st.Model, err = p.str(body, "model", true); err != nil {
			return st, err
		}
		m, ok := f.Models[st.Model]
		if !ok {
			return st, p.errf(join(body.path, "model"), "unknown model %q", st.Model)
		}
		if st.VersionName, err = p.str(body, "version", true); err != nil {
			return st, err
		}
		if def, ok := ck.lookup(st.Model, st.VersionName); ok {
			m = def
		} else {
			return st, p.errf(join(body.path, "version"), "version %q of %s is not set by an earlier deploy or plan step", st.VersionName, st.Model)
		}
		if _, ok := body.vals["intervals"]; !ok {
			return st, p.errf(join(body.path, "intervals"), "is required")
		}
		if st.Intervals, err = p.ranges(join(body.path, "intervals"), body.vals["intervals"]); err != nil {
			return st, err
		}
		if len(st.Intervals) == 0 {
			return st, p.errf(join(body.path, "intervals"), "at least one interval is required")
		}
		sched, _ := interval.NewSchedule(m.Cron, m.IntervalUnit, m.AllowPartials)
		for i, r := range st.Intervals {
			ip := fmt.Sprintf("%s.intervals[%d]", body.path, i)
			if !sched.Unit().Aligned(r.Start) || (!sched.Unit().Aligned(r.End) && !m.AllowPartials) {
				return st, p.errf(ip, "%s is not aligned to the %s unit of %s", r, sched.Unit(), st.Model)
			}
			if st.Kind == "complete" && r.End.After(ck.clock) {
				return st, p.errf(ip, "%s has not ended at the step's clock %s", r, ck.clock.Format(time.RFC3339))
			}
		}
	case "promote":
		if err := p.only(body, "plan", "finalize", "advance_during_catch_up"); err != nil {
			return st, err
		}
		if st.Plan, err = p.planRef(ck, body); err != nil {
			return st, err
		}
		if st.Finalize, err = p.boolean(body, "finalize", true); err != nil {
			return st, err
		}
		if st.AdvanceDuringCatchUp, err = p.tm(body, "advance_during_catch_up", false); err != nil {
			return st, err
		}
		if !st.AdvanceDuringCatchUp.IsZero() {
			if st.AdvanceDuringCatchUp.Before(ck.clock) {
				return st, p.errf(join(body.path, "advance_during_catch_up"), "%s is before the clock %s", st.AdvanceDuringCatchUp.Format(time.RFC3339), ck.clock.Format(time.RFC3339))
			}
			ck.clock = st.AdvanceDuringCatchUp
		}
	case "replay":
		if err := p.only(body); err != nil {
			return st, err
		}
	}
	if ev, ok := so.vals["expect"]; ok {
		if st.Expect, err = p.expect(join(path, "expect"), ev); err != nil {
			return st, err
		}
	}
	return st, nil
}

// lookup finds a version's definition, including derived versions
// "<version>+<plan>" of a known version.
func (ck *checker) lookup(model, version string) (Model, bool) {
	if m, ok := ck.versions[events.SnapshotID(model, version)]; ok {
		return m, true
	}
	if i := strings.LastIndex(version, "+"); i > 0 && ck.plans[version[i+1:]] {
		return ck.lookup(model, version[:i])
	}
	return Model{}, false
}

func (p *parser) name(o *obj, key string) (string, error) {
	s, err := p.str(o, key, true)
	if err != nil {
		return "", err
	}
	if !events.ValidName(s) {
		return "", p.errf(join(o.path, key), "%q: use letters, digits, '_' and '-'", s)
	}
	return s, nil
}

func (p *parser) planRef(ck *checker, o *obj) (string, error) {
	id, err := p.name(o, "plan")
	if err != nil {
		return "", err
	}
	if !ck.plans[id] {
		return "", p.errf(join(o.path, "plan"), "unknown plan %q (no earlier plan step builds it)", id)
	}
	return id, nil
}

func (p *parser) versions(f *File, body *obj) (map[string]Version, error) {
	vo, err := p.object(join(body.path, "versions"), body.vals["versions"])
	if err != nil {
		return nil, err
	}
	if len(vo.keys) == 0 {
		return nil, p.errf(join(body.path, "versions"), "at least one model version is required")
	}
	out := map[string]Version{}
	for _, model := range vo.keys {
		path := join(vo.path, model)
		base, ok := f.Models[model]
		if !ok {
			return nil, p.errf(path, "unknown model %q", model)
		}
		v := Version{Model: base}
		v.Model.DependsOn = append([]string(nil), base.DependsOn...)
		switch val := vo.vals[model].(type) {
		case string:
			v.Name = val
			if err := p.userVersion(path, v.Name); err != nil {
				return nil, err
			}
		default:
			mo, err := p.object(path, val)
			if err != nil {
				return nil, p.errf(path, "want a version string or a mapping with version and overrides")
			}
			if err := p.only(mo, append([]string{"version"}, modelKeys[1:]...)...); err != nil {
				return nil, err
			}
			if v.Name, err = p.str(mo, "version", true); err != nil {
				return nil, err
			}
			if err := p.userVersion(join(path, "version"), v.Name); err != nil {
				return nil, err
			}
			if err := p.modelFields(mo, &v.Model, false); err != nil {
				return nil, err
			}
			for j, d := range v.Model.DependsOn {
				if _, ok := f.Models[d]; !ok {
					return nil, p.errf(fmt.Sprintf("%s.depends_on[%d]", path, j), "unknown model %q", d)
				}
			}
			if err := p.checkModel(path, v.Model); err != nil {
				return nil, err
			}
		}
		out[model] = v
	}
	return out, nil
}

// userVersion checks a version a step defines: '+' is reserved for
// derived versions.
func (p *parser) userVersion(path, v string) error {
	if strings.Contains(v, "+") {
		return p.errf(path, "%q: '+' is reserved for derived versions (<version>+<plan>); use letters, digits, '_' and '-'", v)
	}
	if !events.ValidUserVersion(v) {
		return p.errf(path, "%q: use letters, digits, '_' and '-' (at most 128)", v)
	}
	return nil
}

func (p *parser) expect(path string, raw any) (*Expect, error) {
	eo, err := p.object(path, raw)
	if err != nil {
		return nil, err
	}
	if err := p.only(eo, expectKeys...); err != nil {
		return nil, err
	}
	e := &Expect{keys: len(eo.keys)}
	if _, ok := eo.vals["outcome"]; ok {
		s, err := p.str(eo, "outcome", true)
		if err != nil {
			return nil, err
		}
		if s != string(events.Accepted) && s != string(events.Rejected) {
			return nil, p.errf(join(path, "outcome"), "%q: want accepted or rejected", s)
		}
		e.Outcome = &s
	}
	if _, ok := eo.vals["codes"]; ok {
		if e.Codes, err = p.strList(eo, "codes"); err != nil {
			return nil, err
		}
	}
	if v, ok := eo.vals["missing"]; ok {
		mo, err := p.object(join(path, "missing"), v)
		if err != nil {
			return nil, err
		}
		e.Missing = map[string][]interval.Range{}
		for _, m := range mo.keys {
			if e.Missing[m], err = p.ranges(join(mo.path, m), mo.vals[m]); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := eo.vals["scheduled"]; ok {
		mo, err := p.object(join(path, "scheduled"), v)
		if err != nil {
			return nil, err
		}
		e.Scheduled = map[string][]interval.Range{}
		for _, m := range mo.keys {
			if e.Scheduled[m], err = p.ranges(join(mo.path, m), mo.vals[m]); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := eo.vals["advances"]; ok {
		mo, err := p.object(join(path, "advances"), v)
		if err != nil {
			return nil, err
		}
		e.Advances = map[string]int{}
		for _, m := range mo.keys {
			if e.Advances[m], err = p.intAt(join(mo.path, m), mo.vals[m]); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range []string{"repairs_open", "divergences"} {
		n, ok, err := p.integer(eo, k)
		if err != nil {
			return nil, err
		}
		if ok {
			n := n
			if k == "repairs_open" {
				e.RepairsOpen = &n
			} else {
				e.Divergences = &n
			}
		}
	}
	if v, ok := eo.vals["incumbent"]; ok {
		mo, err := p.object(join(path, "incumbent"), v)
		if err != nil {
			return nil, err
		}
		e.Incumbent = map[string]string{}
		for _, m := range mo.keys {
			if e.Incumbent[m], err = p.str(mo, m, true); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}
