package sqlcheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Timeout bounds one check (parsing and binding a model and its upstream
// models; milliseconds in practice).
const Timeout = 10 * time.Second

// MaxConcurrent bounds the checks ForEngine runs at once (each opens a
// DuckDB of its own, bounded to one thread and 256 MB).
const MaxConcurrent = 2

// ForEngine is an engine.Config.Check: it checks the SQL of every
// register_snapshot that carries some, its upstream models being the
// latest registered version of each model it depends on in the state read
// gives (an engine's live projection: live.Projection.Read), and of each
// registration of a register_snapshots, its upstream models being the
// set's own where it defines them (the registered ones' otherwise). A
// refusal is a *commands.Error, invalid, naming the field ("sql",
// "time_column", or an audit's: "audits[1].sql"; in a set, prefixed
// with the registration's: "snapshots[2].sql").
// Every other command passes.
func ForEngine(read func(func(*projections.State))) func(context.Context, commands.Command) error {
	sem := make(chan struct{}, MaxConcurrent)
	return func(ctx context.Context, cmd commands.Command) error {
		var regs []*commands.RegisterSnapshot
		prefix := func(int) string { return "" }
		switch c := cmd.(type) {
		case *commands.RegisterSnapshot:
			regs = []*commands.RegisterSnapshot{c}
		case *commands.RegisterSnapshots:
			for i := range c.Snapshots {
				regs = append(regs, &c.Snapshots[i])
			}
			prefix = func(i int) string { return fmt.Sprintf("snapshots[%d].", i) }
		}
		set := map[string]Model{}
		var deps []string
		for _, c := range regs {
			set[c.Model] = ModelOf(c)
			deps = append(deps, c.DependsOn...)
		}
		var defs map[string]Model // read once, when some registration has SQL to check
		errs := make([]error, len(regs))
		var wg sync.WaitGroup
		for i, c := range regs {
			if c.SQL == "" && c.SnapshotKind != events.Seed {
				continue
			}
			if defs == nil {
				defs = map[string]Model{}
				read(func(st *projections.State) { defs = latest(st, deps, set) })
				maps.Copy(defs, set)
			}
			// A set's checks run side by side, at most MaxConcurrent at
			// once (sem); the first refusal in the set's order is the one
			// returned.
			wg.Go(func() { errs[i] = check(ctx, sem, set[c.Model], defs, prefix(i)) })
		}
		wg.Wait()
		return firstError(errs)
	}
}

// firstError is the first non-nil error of errs, or nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// check checks m, its upstream models in defs, holding sem while it
// does; a refusal names its field after prefix.
func check(ctx context.Context, sem chan struct{}, m Model, defs map[string]Model, prefix string) error {
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	case <-ctx.Done():
		return commands.Errorf(commands.CodeUnavailable, prefix+"sql", "checking the sql: %v", ctx.Err())
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	err := Check(ctx, m, func(name string) (Model, bool) { d, ok := defs[name]; return d, ok })
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return commands.Errorf(commands.CodeInvalid, prefix+e.Field, "%s %v", e.Field, e)
	default:
		return commands.Errorf(commands.CodeUnavailable, prefix+"sql", "checking the sql: %v", err)
	}
}

// ModelOf is what is checked of a registration (the engine's check and
// apply's local one alike).
func ModelOf(c *commands.RegisterSnapshot) Model {
	return Model{Name: c.Model, SQL: c.SQL, TimeColumn: c.TimeColumn, DependsOn: c.DependsOn, Audits: c.Audits, Grain: c.Grain,
		Kind: string(c.SnapshotKind), Seed: c.Seed, Macros: c.Macros}
}

// latest is the latest registered version of each model deps names, and
// of theirs, transitively; a model set defines is set's (and its own
// dependencies are followed through set).
func latest(st *projections.State, deps []string, set map[string]Model) map[string]Model {
	out := map[string]Model{}
	queue := append([]string(nil), deps...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, seen := out[name]; seen {
			continue
		}
		if m, ok := set[name]; ok {
			out[name] = m
			queue = append(queue, m.DependsOn...)
			continue
		}
		sn := st.LatestVersion(name)
		if sn == nil {
			continue
		}
		out[name] = Model{Name: name, SQL: sn.SQL, TimeColumn: sn.TimeColumn, DependsOn: sn.DependsOn, Kind: string(sn.Kind), Seed: sn.Seed, Macros: sn.Macros}
		queue = append(queue, sn.DependsOn...)
	}
	return out
}
