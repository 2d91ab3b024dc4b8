package sqlcheck

import (
	"context"
	"errors"
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
// gives (an engine's live projection: live.Projection.Read). A refusal is
// a *commands.Error, invalid, naming the field ("sql", "time_column", or
// an audit's: "audits[1].sql").
// Every other command passes.
func ForEngine(read func(func(*projections.State))) func(context.Context, commands.Command) error {
	sem := make(chan struct{}, MaxConcurrent)
	return func(ctx context.Context, cmd commands.Command) error {
		c, ok := cmd.(*commands.RegisterSnapshot)
		if !ok || c.SQL == "" && c.SnapshotKind != events.Seed {
			return nil
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			return commands.Errorf(commands.CodeUnavailable, "sql", "checking the sql: %v", ctx.Err())
		}
		defs := map[string]Model{}
		read(func(st *projections.State) { defs = latest(st, c.DependsOn) })
		ctx, cancel := context.WithTimeout(ctx, Timeout)
		defer cancel()
		m := Model{Name: c.Model, SQL: c.SQL, TimeColumn: c.TimeColumn, DependsOn: c.DependsOn, Audits: c.Audits, Grain: c.Grain,
			Kind: string(c.SnapshotKind), Seed: c.Seed, Macros: c.Macros}
		err := Check(ctx, m, func(name string) (Model, bool) { d, ok := defs[name]; return d, ok })
		var e *Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &e):
			return commands.Errorf(commands.CodeInvalid, e.Field, "%s %v", e.Field, e)
		default:
			return commands.Errorf(commands.CodeUnavailable, "sql", "checking the sql: %v", err)
		}
	}
}

// latest is the latest registered version of each model deps names, and
// of theirs, transitively.
func latest(st *projections.State, deps []string) map[string]Model {
	out := map[string]Model{}
	queue := append([]string(nil), deps...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, seen := out[name]; seen {
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
