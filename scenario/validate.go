package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/models"
)

var modelKeys = []string{"name", "cron", "interval_unit", "lookback", "kind", "allow_partials", "start", "depends_on", "sql", "time_column", "batch_size", "batch_concurrency", "audits", "grain", "seed", "macros", "freshness"}

var stepKinds = []string{"deploy", "plan", "backfill", "run_scheduler", "complete", "invalidate", "promote", "replay"}

var expectKeys = []string{"outcome", "codes", "missing", "advances", "repairs_open", "divergences", "incumbent", "scheduled", "verify"}

// checker carries what validation knows while walking the steps in order.
type checker struct {
	clock    time.Time
	versions map[string]models.Definition // snapshot id -> definition
	plans    map[string]bool
}

func (p *parser) parseFile(raw modelfile.Node) (*File, error) {
	top, err := raw.Map()
	if err != nil {
		return nil, err
	}
	if err := top.Only("name", "clock", "models", "steps"); err != nil {
		return nil, err
	}
	f := &File{Path: p.file, Models: map[string]models.Definition{}}
	if f.Name, err = top.Str("name", true); err != nil {
		return nil, err
	}
	if f.Clock, err = top.Time("clock", true); err != nil {
		return nil, err
	}
	ms, err := top.Get("models").List()
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, p.errf("models", "at least one model is required")
	}
	for i, mv := range ms {
		path := fmt.Sprintf("models[%d]", i)
		mo, err := mv.Map()
		if err != nil {
			return nil, err
		}
		if err := mo.Only(modelKeys...); err != nil {
			return nil, err
		}
		name, err := mo.Str("name", true)
		if err != nil {
			return nil, err
		}
		if !events.ValidModelName(name) {
			return nil, p.errf(path+".name", "%q: use letters, digits, '_' and '-', or schema.model", name)
		}
		if _, dup := f.Models[name]; dup {
			return nil, p.errf(path+".name", "model %q is defined twice", name)
		}
		m, err := modelfile.DecodeModel(mo, models.Definition{Model: name})
		if err != nil {
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
	steps, err := top.Get("steps").List()
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return nil, p.errf("steps", "at least one step is required")
	}
	ck := &checker{clock: f.Clock, versions: map[string]models.Definition{}, plans: map[string]bool{}}
	for i, sv := range steps {
		st, err := p.step(f, ck, i+1, sv)
		if err != nil {
			return nil, err
		}
		f.Steps = append(f.Steps, st)
	}
	return f, nil
}

// DefaultSeed is the CSV content of a seed (kind: seed) whose scenario
// file gives none: `seed:` is optional in a scenario file, since the
// built-in worker only records the ranges it is given and reads no CSV.
// A run with a warehouse loads the content like any seed's.
const DefaultSeed = "id\n1\n"

// withDefaults is d as a scenario registers it: a seed without content
// gets DefaultSeed.
func withDefaults(d models.Definition) models.Definition {
	if d.Kind == events.Seed && d.Seed == "" {
		d.Seed = DefaultSeed
	}
	return d
}

// checkModel validates a model's definition (models.Definition.Validate),
// with the scenario's defaults (withDefaults).
func (p *parser) checkModel(path string, m models.Definition) error {
	if err := withDefaults(m).Validate(); err != nil {
		fe := err.(*models.FieldError)
		return p.errf(path+"."+fe.Key, "%s", fe.Detail)
	}
	return nil
}

func (p *parser) step(f *File, ck *checker, n int, raw modelfile.Node) (Step, error) {
	path := fmt.Sprintf("step %d", n)
	so, err := raw.At(path).Map()
	if err != nil {
		return Step{}, err
	}
	st := Step{Num: n, Finalize: true}
	var kinds []string
	for _, k := range so.Keys() {
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
		return Step{}, so.Errorf(st.Kind, "unknown step %q (want one of %s)", st.Kind, strings.Join(stepKinds, ", "))
	}
	body, err := so.Get(st.Kind).Map()
	if err != nil {
		return Step{}, err
	}
	switch st.Kind {
	case "deploy", "plan":
		allowed := []string{"env", "versions"}
		if st.Kind == "plan" {
			allowed = append(allowed, "id", "max_trailing_gap_advances", "max_catch_up_advances")
		}
		if err := body.Only(allowed...); err != nil {
			return st, err
		}
		if st.Env, err = p.name(body, "env"); err != nil {
			return st, err
		}
		if st.Versions, err = p.versions(f, body); err != nil {
			return st, err
		}
		for _, v := range st.Versions {
			ck.versions[events.SnapshotID(v.Model.Model, v.Name)] = v.Model
		}
		if st.Kind == "plan" {
			if st.Plan, err = p.name(body, "id"); err != nil {
				return st, err
			}
			if ck.plans[st.Plan] {
				return st, body.Errorf("id", "plan %q is built twice", st.Plan)
			}
			ck.plans[st.Plan] = true
			if st.Bounds.MaxTrailingGapAdvances, _, err = body.Int("max_trailing_gap_advances"); err != nil {
				return st, err
			}
			if st.Bounds.MaxCatchUpAdvances, _, err = body.Int("max_catch_up_advances"); err != nil {
				return st, err
			}
		}
	case "backfill":
		if err := body.Only("plan", "through"); err != nil {
			return st, err
		}
		if st.Plan, err = p.planRef(ck, body); err != nil {
			return st, err
		}
		if st.Through, err = body.Time("through", false); err != nil {
			return st, err
		}
	case "run_scheduler":
		if err := body.Only("env", "until", "worker", "generation"); err != nil {
			return st, err
		}
		if n, ok, err := body.Int("generation"); err != nil {
			return st, err
		} else if ok {
			if n < 1 {
				return st, body.Errorf("generation", "%d: an environment generation is >= 1", n)
			}
			st.Generation = uint64(n)
		}
		if st.Env, err = p.name(body, "env"); err != nil {
			return st, err
		}
		if st.Until, err = body.Time("until", true); err != nil {
			return st, err
		}
		if st.Until.Before(ck.clock) {
			return st, body.Errorf("until", "%s is before the clock %s", st.Until.Format(time.RFC3339), ck.clock.Format(time.RFC3339))
		}
		w, err := body.Str("worker", false)
		if err != nil {
			return st, err
		}
		switch w {
		case "", "running":
		case "paused":
			st.WorkerPaused = true
		default:
			return st, body.Errorf("worker", "%q: want paused or running", w)
		}
		ck.clock = st.Until
	case "complete", "invalidate":
		allowed := []string{"model", "version", "intervals"}
		if st.Kind == "complete" {
			allowed = append(allowed, "audits")
		}
		if err := body.Only(allowed...); err != nil {
			return st, err
		}
		if st.Model, err = body.Str("model", true); err != nil {
			return st, err
		}
		m, ok := f.Models[st.Model]
		if !ok {
			return st, body.Errorf("model", "unknown model %q", st.Model)
		}
		if st.VersionName, err = body.Str("version", true); err != nil {
			return st, err
		}
		if def, ok := ck.lookup(st.Model, st.VersionName); ok {
			m = def
		} else {
			return st, body.Errorf("version", "version %q of %s is not set by an earlier deploy or plan step", st.VersionName, st.Model)
		}
		if !body.Has("intervals") {
			return st, body.Errorf("intervals", "is required")
		}
		if st.Intervals, err = body.Get("intervals").Ranges(); err != nil {
			return st, err
		}
		if len(st.Intervals) == 0 {
			return st, body.Errorf("intervals", "at least one interval is required")
		}
		sched, _ := interval.NewSchedule(m.Cron, m.Unit, m.AllowPartials)
		for i, r := range st.Intervals {
			ip := fmt.Sprintf("%s.intervals[%d]", body.Path(), i)
			if !sched.Unit().Aligned(r.Start) || (!sched.Unit().Aligned(r.End) && !m.AllowPartials) {
				return st, p.errf(ip, "%s is not aligned to the %s unit of %s", r, sched.Unit(), st.Model)
			}
			if st.Kind == "complete" && r.End.After(ck.clock) {
				return st, p.errf(ip, "%s has not ended at the step's clock %s", r, ck.clock.Format(time.RFC3339))
			}
		}
		if body.Has("audits") {
			if st.Audits, err = p.audits(body, m); err != nil {
				return st, err
			}
		}
	case "promote":
		if err := body.Only("plan", "finalize", "advance_during_catch_up"); err != nil {
			return st, err
		}
		if st.Plan, err = p.planRef(ck, body); err != nil {
			return st, err
		}
		if st.Finalize, err = body.Bool("finalize", true); err != nil {
			return st, err
		}
		if st.AdvanceDuringCatchUp, err = body.Time("advance_during_catch_up", false); err != nil {
			return st, err
		}
		if !st.AdvanceDuringCatchUp.IsZero() {
			if st.AdvanceDuringCatchUp.Before(ck.clock) {
				return st, body.Errorf("advance_during_catch_up", "%s is before the clock %s", st.AdvanceDuringCatchUp.Format(time.RFC3339), ck.clock.Format(time.RFC3339))
			}
			ck.clock = st.AdvanceDuringCatchUp
		}
	case "replay":
		if err := body.Only(); err != nil {
			return st, err
		}
	}
	if so.Has("expect") {
		if st.Expect, err = p.expect(so.Get("expect")); err != nil {
			return st, err
		}
	}
	return st, nil
}

// audits reads a complete step's audits: a mapping of the names of audits
// the version declares to {passed: bool, count: N} (count defaults to 0).
func (p *parser) audits(body *modelfile.Map, m models.Definition) ([]events.AuditOutcome, error) {
	ao, err := body.Get("audits").Map()
	if err != nil {
		return nil, err
	}
	var out []events.AuditOutcome
	for _, name := range ao.Keys() {
		if !slices.ContainsFunc(m.Audits, func(a models.Audit) bool { return a.Name == name }) {
			declared := make([]string, len(m.Audits))
			for i, a := range m.Audits {
				declared[i] = a.Name
			}
			return nil, ao.Errorf(name, "the version declares no audit %q (it declares: %s)", name, strings.Join(declared, ", "))
		}
		o, err := ao.Get(name).Map()
		if err != nil {
			return nil, err
		}
		if err := o.Only("passed", "count"); err != nil {
			return nil, err
		}
		if !o.Has("passed") {
			return nil, o.Errorf("passed", "is required")
		}
		outcome := events.AuditOutcome{Audit: name}
		if outcome.Passed, err = o.Bool("passed", false); err != nil {
			return nil, err
		}
		if n, ok, err := o.Int("count"); err != nil {
			return nil, err
		} else if ok {
			outcome.Count = int64(n)
		}
		out = append(out, outcome)
	}
	return out, nil
}

// lookup finds a version's definition, including derived versions
// "<version>+<plan>" of a known version.
func (ck *checker) lookup(model, version string) (models.Definition, bool) {
	if m, ok := ck.versions[events.SnapshotID(model, version)]; ok {
		return m, true
	}
	if i := strings.LastIndex(version, "+"); i > 0 && ck.plans[version[i+1:]] {
		return ck.lookup(model, version[:i])
	}
	return models.Definition{}, false
}

func (p *parser) name(o *modelfile.Map, key string) (string, error) {
	s, err := o.Str(key, true)
	if err != nil {
		return "", err
	}
	if !events.ValidName(s) {
		return "", o.Errorf(key, "%q: use letters, digits, '_' and '-'", s)
	}
	return s, nil
}

func (p *parser) planRef(ck *checker, o *modelfile.Map) (string, error) {
	id, err := p.name(o, "plan")
	if err != nil {
		return "", err
	}
	if !ck.plans[id] {
		return "", o.Errorf("plan", "unknown plan %q (no earlier plan step builds it)", id)
	}
	return id, nil
}

func (p *parser) versions(f *File, body *modelfile.Map) (map[string]Version, error) {
	vo, err := body.Get("versions").Map()
	if err != nil {
		return nil, err
	}
	if len(vo.Keys()) == 0 {
		return nil, body.Errorf("versions", "at least one model version is required")
	}
	out := map[string]Version{}
	for _, model := range vo.Keys() {
		vn := vo.Get(model)
		path := vn.Path()
		base, ok := f.Models[model]
		if !ok {
			return nil, p.errf(path, "unknown model %q", model)
		}
		v := Version{Model: base}
		v.Model.DependsOn = append([]string(nil), base.DependsOn...)
		if name, ok := vn.Text(); ok {
			v.Name = name
			if err := p.userVersion(path, v.Name); err != nil {
				return nil, err
			}
		} else {
			mo, err := vn.Map()
			if err != nil {
				return nil, p.errf(path, "want a version string or a mapping with version and overrides")
			}
			if err := mo.Only(append([]string{"version"}, modelKeys[1:]...)...); err != nil {
				return nil, err
			}
			if v.Name, err = mo.Str("version", true); err != nil {
				return nil, err
			}
			if err := p.userVersion(path+".version", v.Name); err != nil {
				return nil, err
			}
			if v.Model, err = modelfile.DecodeModel(mo, base); err != nil {
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

// userVersion checks a version a step defines (models.CheckVersion).
func (p *parser) userVersion(path, v string) error {
	if fe := models.CheckVersion(v); fe != nil {
		return p.errf(path, "%s", fe.Detail)
	}
	return nil
}

func (p *parser) expect(raw modelfile.Node) (*Expect, error) {
	eo, err := raw.Map()
	if err != nil {
		return nil, err
	}
	if err := eo.Only(expectKeys...); err != nil {
		return nil, err
	}
	e := &Expect{keys: len(eo.Keys())}
	if eo.Has("outcome") {
		s, err := eo.Str("outcome", true)
		if err != nil {
			return nil, err
		}
		if s != string(events.Accepted) && s != string(events.Rejected) {
			return nil, eo.Errorf("outcome", "%q: want accepted or rejected", s)
		}
		e.Outcome = &s
	}
	if eo.Has("codes") {
		if e.Codes, err = eo.StrList("codes"); err != nil {
			return nil, err
		}
	}
	if eo.Has("missing") {
		mo, err := eo.Get("missing").Map()
		if err != nil {
			return nil, err
		}
		e.Missing = map[string][]interval.Range{}
		for _, m := range mo.Keys() {
			if e.Missing[m], err = mo.Get(m).Ranges(); err != nil {
				return nil, err
			}
		}
	}
	if eo.Has("scheduled") {
		mo, err := eo.Get("scheduled").Map()
		if err != nil {
			return nil, err
		}
		e.Scheduled = map[string][]interval.Range{}
		for _, m := range mo.Keys() {
			if e.Scheduled[m], err = mo.Get(m).Ranges(); err != nil {
				return nil, err
			}
		}
	}
	if eo.Has("advances") {
		mo, err := eo.Get("advances").Map()
		if err != nil {
			return nil, err
		}
		e.Advances = map[string]int{}
		for _, m := range mo.Keys() {
			if e.Advances[m], err = mo.Get(m).Int(); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range []string{"repairs_open", "divergences"} {
		n, ok, err := eo.Int(k)
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
	if eo.Has("verify") {
		vo, err := eo.Get("verify").Map()
		if err != nil {
			return nil, err
		}
		if err := vo.Only("diffs"); err != nil {
			return nil, err
		}
		n, ok, err := vo.Int("diffs")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, vo.Errorf("diffs", "is required: verify: {diffs: N}")
		}
		e.VerifyDiffs = &n
	}
	if eo.Has("incumbent") {
		mo, err := eo.Get("incumbent").Map()
		if err != nil {
			return nil, err
		}
		e.Incumbent = map[string]string{}
		for _, m := range mo.Keys() {
			if e.Incumbent[m], err = mo.Str(m, true); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}
