package modelfile

import (
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
)

// DecodeModel reads the model fields m gives (cron, interval_unit,
// lookback, kind, allow_partials, start, depends_on, sql, time_column,
// batch_size, batch_concurrency, audits, grain, seed, macros) over base: a version's
// overrides of its model's definition. A base without a cron is a model's
// own definition, so cron and start are required. It checks how each field
// is written; whether the definition holds is models.Definition.Validate.
// The caller has refused m's other keys (Map.Only).
func DecodeModel(m *Map, base models.Definition) (models.Definition, error) {
	d := base
	d.DependsOn = append([]string(nil), base.DependsOn...)
	top := base.Cron == ""
	var err error
	if cron, err := m.Str("cron", top); err != nil {
		return d, err
	} else if cron != "" {
		d.Cron = cron
	}
	if u, err := m.Str("interval_unit", false); err != nil {
		return d, err
	} else if u != "" {
		unit, err := interval.ParseUnit(u)
		if err != nil {
			return d, m.Errorf("interval_unit", "%v", err)
		}
		d.Unit = unit
	}
	if n, ok, err := m.Int("lookback"); err != nil {
		return d, err
	} else if ok {
		d.Lookback = n
	}
	if k, err := m.Str("kind", false); err != nil {
		return d, err
	} else if k != "" {
		d.Kind = events.Kind(k)
	}
	if m.Has("allow_partials") {
		if d.AllowPartials, err = m.Bool("allow_partials", false); err != nil {
			return d, err
		}
	}
	if m.Has("start") || top {
		if d.Start, err = m.Time("start", top); err != nil {
			return d, err
		}
	}
	if m.Has("depends_on") {
		if d.DependsOn, err = m.StrList("depends_on"); err != nil {
			return d, err
		}
	}
	if m.Has("sql") {
		if d.SQL, err = m.Str("sql", false); err != nil {
			return d, err
		}
	}
	if m.Has("time_column") {
		if d.TimeColumn, err = m.Str("time_column", false); err != nil {
			return d, err
		}
	}
	if m.Has("seed") {
		if d.Seed, err = m.Str("seed", false); err != nil {
			return d, err
		}
	}
	if m.Has("macros") {
		if d.Macros, err = m.Str("macros", false); err != nil {
			return d, err
		}
	}
	if m.Has("freshness") {
		if d.Freshness, err = m.Str("freshness", false); err != nil {
			return d, err
		}
	}
	if m.Has("audits") {
		if d.Audits, err = DecodeAudits(m.Get("audits")); err != nil {
			return d, err
		}
	}
	if m.Has("grain") {
		if one, ok := m.Get("grain").Text(); ok {
			d.Grain = []string{one}
		} else if d.Grain, err = m.StrList("grain"); err != nil {
			return d, err
		}
	}
	for _, f := range []struct {
		key string
		v   *int
	}{{"batch_size", &d.BatchSize}, {"batch_concurrency", &d.BatchConcurrency}} {
		if n, ok, err := m.Int(f.key); err != nil {
			return d, err
		} else if ok {
			if n < 1 {
				return d, m.Errorf(f.key, "must be >= 1 (omit it for the default)")
			}
			*f.v = n
		}
	}
	return d, nil
}
