package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/sqlcheck"
)

func newApplyCmd() *cobra.Command {
	var f clientFlags
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f models.yaml",
		Short: "Register the models of a model file (unchanged definitions are no-ops; a change is a new version)",
		Long: "apply registers every model of the file, upstream models first. A model without\n" +
			"`version` gets one derived from its definition (d + 10 hex of its fingerprint), so\n" +
			"re-applying an unchanged file registers nothing and any change registers a new version.\n" +
			"An explicit version whose definition changed is refused: give the change a new version.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return &exitError{kind: usage, err: errors.New("-f is required: the model file to apply")}
			}
			ms, err := modelfile.Load(file)
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			if err := checkSQL(cmd.Context(), file, ms); err != nil {
				return &exitError{kind: usage, err: err}
			}
			nc, err := connect(f.natsURL)
			if err != nil {
				return err
			}
			defer nc.Close()
			type result struct {
				Snapshot   string `json:"snapshot"`
				Registered bool   `json:"registered"`
				Seq        uint64 `json:"seq"`
			}
			var results []result
			for _, m := range ms {
				reg := m.Register
				reg.Meta = commands.Meta{Actor: "cli:apply"}
				r, err := send(cmd.Context(), nc, &reg)
				if err != nil {
					var ee *exitError
					if errors.As(err, &ee) && ee.kind == failed && r.Code == commands.CodeConflict {
						line := m.VersionLine
						if line == 0 {
							line = m.Line
						}
						return &exitError{kind: failed, err: fmt.Errorf("%s:%d: version: %s", file, line, r.Message)}
					}
					return err
				}
				results = append(results, result{Snapshot: reg.Model + "@" + reg.Version, Registered: r.Events > 0, Seq: r.Seq})
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
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "model file (YAML)")
	return cmd
}

// checkSQL runs the server's SQL check (sqlcheck) on a file's models
// before anything is sent, so a refusal names the file's line; a build
// without cgo leaves it to the server. Upstream models are the file's.
func checkSQL(ctx context.Context, file string, ms []modelfile.Model) error {
	if !sqlcheck.Available() {
		return nil
	}
	defs := map[string]sqlcheck.Model{}
	for _, m := range ms {
		r := m.Register
		defs[r.Model] = sqlcheck.Model{Name: r.Model, SQL: r.SQL, TimeColumn: r.TimeColumn, DependsOn: r.DependsOn, Audits: r.Audits, Grain: r.Grain,
			Kind: string(r.SnapshotKind), Seed: r.Seed}
	}
	lookup := func(name string) (sqlcheck.Model, bool) { d, ok := defs[name]; return d, ok }
	for _, m := range ms {
		err := sqlcheck.Check(ctx, defs[m.Register.Model], lookup)
		var e *sqlcheck.Error
		if !errors.As(err, &e) {
			if err != nil {
				return fmt.Errorf("%s: checking models[%d].sql: %w", file, m.Index, err)
			}
			continue
		}
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
	return nil
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
