package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/sqlcheck"
	"github.com/tidemark/tidemark/sqlmesh/project"
)

func newApplyCmd() *cobra.Command {
	var f clientFlags
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f models.yaml|PROJECT_DIR",
		Short: "Register the models of a model file or a SQLMesh project (unchanged definitions are no-ops; a change is a new version)",
		Long: "apply registers every model of the file, upstream models first, in one command\n" +
			"(register_snapshots): all of them or none; a refusal names the model's line. A model without\n" +
			"`version` gets one derived from its definition (d + 10 hex of its fingerprint), so\n" +
			"re-applying an unchanged file registers nothing and any change registers a new version.\n" +
			"An explicit version whose definition changed is refused: give the change a new version.\n\n" +
			"-f may also name a SQLMesh project (its directory, or one of its model files):\n" +
			"models/**/*.sql (MODEL blocks), audits/**/*.sql (AUDIT blocks), the seeds' CSVs and\n" +
			"config.yaml's model_defaults; each model's version is its content's fingerprint and its\n" +
			"depends_on the project's models its query reads (README: From a SQLMesh project).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return &exitError{kind: usage, err: errors.New("-f is required: the model file (or SQLMesh project) to apply")}
			}
			if isProject(file) {
				return applyProject(cmd, f, file)
			}
			ms, err := modelfile.Load(file)
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			if err := checkSQL(cmd.Context(), file, ms); err != nil {
				return &exitError{kind: usage, err: err}
			}
			regs := make([]applied, len(ms))
			for i, m := range ms {
				line := m.VersionLine
				if line == 0 {
					line = m.Line
				}
				regs[i] = applied{reg: m.Register, at: fmt.Sprintf("%s:%d", file, line)}
			}
			return register(cmd, f, regs)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "model file (YAML), or a SQLMesh project: its directory or one of its model files (.sql)")
	return cmd
}

// applied is a registration apply sends, with where its file defines it
// (file:line, for a conflict's message).
type applied struct {
	reg commands.RegisterSnapshot
	at  string
}

// register sends regs (upstream models first) as one register_snapshots:
// all of them are registered or none. It prints what each did:
// registered, or unchanged. A refusal of one registration names its
// file's line (a version registered with another definition, a
// dependency cycle, …).
func register(cmd *cobra.Command, f clientFlags, regs []applied) error {
	c := &commands.RegisterSnapshots{Meta: commands.Meta{Actor: "cli:apply"}, Snapshots: make([]commands.RegisterSnapshot, len(regs))}
	for i, a := range regs {
		c.Snapshots[i] = a.reg
		c.Snapshots[i].Meta = commands.Meta{}
	}
	r, err := request(cmd, f.natsURL, c)
	if err != nil {
		return placeRefusal(err, r, regs)
	}
	type result struct {
		Snapshot   string `json:"snapshot"`
		Registered bool   `json:"registered"`
		Seq        uint64 `json:"seq,omitempty"`
	}
	// The registered snapshots are the command's events, in its order,
	// the last at r.Seq.
	seqs := make(map[string]uint64, len(r.Registered))
	for i, id := range r.Registered {
		seqs[id] = r.Seq + 1 - uint64(len(r.Registered)-i)
	}
	results := make([]result, len(regs))
	for i, a := range regs {
		id := a.reg.Model + "@" + a.reg.Version
		seq, ok := seqs[id]
		results[i] = result{Snapshot: id, Registered: ok, Seq: seq}
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		return json.NewEncoder(out).Encode(results)
	}
	changed := 0
	for _, r := range results {
		if r.Registered {
			changed++
			fmt.Fprintf(out, "registered %s (seq %d)\n", r.Snapshot, r.Seq)
		} else {
			fmt.Fprintf(out, "unchanged  %s\n", r.Snapshot)
		}
	}
	fmt.Fprintf(out, "%d model(s), %d registered, %d unchanged\n", len(results), changed, len(results)-changed)
	return nil
}

// placeRefusal puts a refusal of register_snapshots naming one of its
// registrations (field snapshots[i].f) at that registration's file
// line: "models.yaml:12: version: … (nothing was registered)". Other
// errors pass unchanged.
func placeRefusal(err error, r commands.Reply, regs []applied) error {
	rest, ok := strings.CutPrefix(r.Field, "snapshots[")
	if !ok {
		return err
	}
	n, field, ok := strings.Cut(rest, "].")
	i, perr := strconv.Atoi(n)
	if !ok || perr != nil || i < 0 || i >= len(regs) {
		return err
	}
	var ce *commands.Error
	if !errors.As(err, &ce) {
		return err
	}
	return &replyError{msg: fmt.Sprintf("%s: %s: %s (nothing was registered)", regs[i].at, field, r.Message), ce: ce}
}

// isProject reports whether path is a SQLMesh project to apply: a
// directory, or a model file (.sql).
func isProject(path string) bool {
	if strings.EqualFold(filepath.Ext(path), ".sql") {
		return true
	}
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// applyProject is apply of a SQLMesh project (package sqlmesh/project):
// its notes (what tidemark does not read) on stderr, its models checked
// by the server's SQL check here, then registered in dependency order.
func applyProject(cmd *cobra.Command, f clientFlags, path string) error {
	p, err := project.Load(cmd.Context(), path)
	if err != nil {
		return &exitError{kind: usage, err: err}
	}
	for _, n := range p.Notes {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", n)
	}
	if err := checkProject(cmd.Context(), p); err != nil {
		return &exitError{kind: usage, err: err}
	}
	regs := make([]applied, len(p.Models))
	for i, m := range p.Models {
		regs[i] = applied{reg: m.Register, at: fmt.Sprintf("%s:%d", m.File, m.Line)}
	}
	return register(cmd, f, regs)
}

// checkProject runs the server's SQL check on a project's models (the
// upstream models are the project's), a refusal placed at its file's
// line: the query's line for the SQL's, the MODEL block's otherwise.
func checkProject(ctx context.Context, p *project.Project) error {
	regs := make([]commands.RegisterSnapshot, len(p.Models))
	for i, m := range p.Models {
		regs[i] = m.Register
	}
	i, e, err := checkSet(ctx, regs)
	if err != nil {
		m := p.Models[i]
		return fmt.Errorf("%s: checking %s: %w", m.File, m.Register.Model, err)
	}
	if e == nil {
		return nil
	}
	m := p.Models[i]
	if e.Upstream == "" {
		return m.Place(e.Field, e.Error())
	}
	return &project.Error{File: m.File, Line: m.Line, Property: e.Field, Msg: e.Error()}
}

// checkSQL runs the server's SQL check (sqlcheck) on a file's models
// before anything is sent, so a refusal names the file's line; a build
// without cgo leaves it to the server. Upstream models are the file's.
func checkSQL(ctx context.Context, file string, ms []modelfile.Model) error {
	regs := make([]commands.RegisterSnapshot, len(ms))
	for i, m := range ms {
		regs[i] = m.Register
	}
	i, e, err := checkSet(ctx, regs)
	if err != nil {
		return fmt.Errorf("%s: checking models[%d].sql: %w", file, ms[i].Index, err)
	}
	if e == nil {
		return nil
	}
	m := ms[i]
	line := m.SQLLine
	if e.Field == "time_column" {
		line = m.TimeColumnLine
	} else if strings.HasPrefix(e.Field, "audits[") {
		line = m.Line // the model's: its audits are in it
	} else if e.Line > 0 && blockScalar(file, line) {
		line += e.Line // a block scalar's text starts on the next line
	}
	return &modelfile.Error{File: file, Line: line, Path: fmt.Sprintf("models[%d].%s", m.Index, e.Field), Msg: e.Error()}
}

// checkSet runs sqlcheck on regs in order, each reading the others as its
// upstream models: the index of the first refused, with its refusal e,
// or with err when the check itself failed (a cancelled ctx). Nothing is
// checked by a build without cgo (the server checks).
func checkSet(ctx context.Context, regs []commands.RegisterSnapshot) (i int, e *sqlcheck.Error, err error) {
	if !sqlcheck.Available() {
		return 0, nil, nil
	}
	defs := map[string]sqlcheck.Model{}
	for i := range regs {
		defs[regs[i].Model] = sqlcheck.ModelOf(&regs[i])
	}
	lookup := func(name string) (sqlcheck.Model, bool) { d, ok := defs[name]; return d, ok }
	for i := range regs {
		err := sqlcheck.Check(ctx, defs[regs[i].Model], lookup)
		if errors.As(err, &e) {
			return i, e, nil
		}
		if err != nil {
			return i, nil, err
		}
	}
	return 0, nil, nil
}

// blockScalar reports whether line n of file holds a key whose value is a
// literal block scalar ("sql: |").
func blockScalar(file string, n int) bool {
	b, err := os.ReadFile(file)
	if err != nil || n < 1 {
		return false
	}
	lines := strings.Split(string(b), "\n")
	if n > len(lines) {
		return false
	}
	_, v, ok := strings.Cut(lines[n-1], ":")
	return ok && strings.HasPrefix(strings.TrimSpace(v), "|")
}
