package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/transport"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, stderr, code := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(out, "tidemark ") || !strings.Contains(out, "\ngo: go1.") ||
			!strings.Contains(out, fmt.Sprintf("event policy version: %d\n", policy.Version)) {
			t.Fatalf("%v: exit %d %q %q", args, code, out, stderr)
		}
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/tidemark/tidemark", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := formatVersion(bi, true)
	for _, want := range []string{"tidemark v1.2.3\n", "revision: abc123 (modified)\n", "2026-12-01T10:00:00Z\n", "go: go1.26.0\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("version lacks %q:\n%s", want, got)
		}
	}
	if got := formatVersion(nil, false); !strings.HasPrefix(got, "tidemark (devel)\n") || strings.Contains(got, "revision") {
		t.Errorf("no build info:\n%s", got)
	}
}

// closedPort is a loopback URL nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + addr
}

func TestExitCodes(t *testing.T) {
	closed := closedPort(t)
	for _, c := range []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"bad flag", []string{"status", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"bad output", []string{"repairs", "-o", "yaml"}, exitUsage, `"yaml" for "-o, --output" flag: want table or json`},
		{"bad output nested", []string{"events", "tail", "-o", "csv"}, exitUsage, "--output"},
		{"missing arg", []string{"promote"}, exitUsage, "accepts 1 arg"},
		{"janitor grace too short", []string{"serve", "--data-dir", "never-created", "--janitor-grace", "10m"}, exitUsage, "--janitor-grace 10m0s: at least 1h0m0s"},
		{"retention too short", []string{"serve", "--data-dir", "never-created", "--retain", "10m"}, exitUsage, "--retain 10m0s: at least 1h0m0s"},
		{"retention too long", []string{"serve", "--data-dir", "never-created", "--retain", "900000h"}, exitUsage, "--retain 900000h0m0s: at most 100 years"},
		{"rollback without env", []string{"rollback"}, exitUsage, `required flag(s) "env" not set`},
		{"rollback unreachable", []string{"rollback", "--env", "prod", "--nats-url", closed}, exitUnreachable, "cannot reach"},
		{"status unreachable", []string{"status", "--nats-url", closed}, exitUnreachable, "cannot reach the tidemark server at " + closed},
		{"plan unreachable", []string{"plan", "--env", "prod", "--set", "a=v1", "--nats-url", closed}, exitUnreachable, "cannot reach"},
		{"replay unreachable", []string{"replay", "--nats-url", closed}, exitUnreachable, "cannot reach NATS"},
		{"events unreachable", []string{"events", "tail", "--nats-url", closed}, exitUnreachable, "cannot reach NATS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.say) {
				t.Fatalf("exit %d, want %d saying %q: %s", code, c.code, c.say, stderr)
			}
		})
	}
}

// A server that answers but holds no tidemark service is unreachable
// too (transport.ErrNoService): exit 4.
func TestExitNoService(t *testing.T) {
	node := jstest.Node(t)
	_, stderr, code := runCLI(t, "repairs", "--nats-url", node.ClientURL())
	if code != exitUnreachable || !strings.Contains(stderr, transport.ErrNoService.Error()) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "events", "get", "1", "--nats-url", node.ClientURL()); code != exitNotFound {
		t.Fatalf("events get without a stream: exit %d: %s", code, stderr)
	}
}

// On a real server: a plan that does not exist is exit 3, and a fresh
// server's status JSON has lists, never null.
func TestExitNotFoundAndFreshStatus(t *testing.T) {
	s := startServe(t)
	_, stderr, code := runCLI(t, "promote", "nope", "--nats-url", s.nats)
	if code != exitNotFound || !strings.Contains(stderr, "not_found") {
		t.Fatalf("promote of an unknown plan: exit %d: %s", code, stderr)
	}
	out, stderr, code := runCLI(t, "status", "--nats-url", s.nats, "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, stderr)
	}
	checkNoNullNoZeroTime(t, out)
	var st struct {
		Envs []commands.EnvStatus `json:"envs"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Envs == nil {
		t.Fatalf("status: %v %s", err, out)
	}
	out, _, code = runCLI(t, "repairs", "--nats-url", s.nats, "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("repairs: exit %d %q", code, out)
	}

	// With nobody computing work, plan --wait gives up (exit 1) and the
	// plan shows in flight, none of its backfill done.
	models := filepath.Join(t.TempDir(), "models.yaml")
	start := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	os.WriteFile(models, []byte("models:\n  - name: events\n    version: v1\n    cron: \"@hourly\"\n    start: "+start.Format(time.RFC3339)+"\n"), 0o644)
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events=v1", "--id", "w1", "--nats-url", s.nats, "--wait", "300ms"); code != exitFailed ||
		!strings.Contains(stderr, "--wait: plan w1's backfill is not computed after 300ms, backfill 0s of 2h0m0s (0%)") {
		t.Fatalf("plan --wait with no worker: exit %d %s", code, stderr)
	}
	out, _, _ = runCLI(t, "status", "--nats-url", s.nats)
	if !strings.Contains(out, "plan in flight: w1 for prod, backfill 0s of 2h0m0s (0%)") {
		t.Fatalf("status lacks the plan in flight:\n%s", out)
	}
}

func checkNoNullNoZeroTime(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "null") || strings.Contains(out, "0001-01-01") {
		t.Fatalf("status JSON holds null or a zero time:\n%s", out)
	}
}

// A deployed incumbent the scheduler never ticked: status -o json omits
// last_tick instead of printing the zero time.
func TestStatusJSONNeverTicked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "fresh.yaml")
	os.WriteFile(file, []byte(`name: fresh
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
steps:
  - deploy: {env: prod, versions: {events: v1}}
`), 0o644)
	data := filepath.Join(dir, "data")
	if _, stderr, code := runCLI(t, "scenario", "run", "--data-dir", data, file); code != 0 {
		t.Fatalf("scenario: exit %d %s", code, stderr)
	}
	out, stderr, code := runCLI(t, "status", "--data-dir", data, "-o", "json")
	if code != 0 || !strings.Contains(out, `"model":"events"`) {
		t.Fatalf("status: exit %d %s %s", code, out, stderr)
	}
	checkNoNullNoZeroTime(t, out)
	if strings.Contains(out, "last_tick") {
		t.Fatalf("last_tick of a never-ticked incumbent: %s", out)
	}
}

// pflag renders a `word` in a flag's usage as the flag's type name
// (--data-dir tidemark serve …): no usage may hold a backtick.
func TestNoBacktickInFlagUsage(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			n++
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: backtick in usage %q", c.CommandPath(), f.Name, f.Usage)
			}
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if n < 50 {
		t.Fatalf("walked only %d flags", n)
	}
}

// Every verb that prints results takes -o with the same validation.
func TestOutputFlagEverywhere(t *testing.T) {
	root := newRootCmd()
	for _, path := range [][]string{{"status"}, {"repairs"}, {"replay"}, {"audit"}, {"audit", "explain"}, {"plan"}, {"promote"},
		{"apply"}, {"scenario", "run"}, {"bench"}, {"events", "tail"}, {"events", "get"}, {"restate"}, {"diff"}} {
		c, _, err := root.Find(path)
		if err != nil || c.Flags().Lookup("output") == nil || c.Flags().ShorthandLookup("o") == nil {
			t.Errorf("%v: no -o/--output (%v)", path, err)
		}
	}
	for _, path := range [][]string{{"status"}, {"repairs"}, {"replay"}, {"audit"}, {"plan"}, {"promote"}, {"apply"}, {"events", "tail"}, {"events", "get"}, {"worker"}, {"restate"}, {"diff"}} {
		c, _, _ := root.Find(path)
		if f := c.Flags().Lookup("nats-url"); f == nil || f.DefValue != defaultNatsURL {
			t.Errorf("%v: --nats-url default %v, want %s", path, f, defaultNatsURL)
		}
	}
}

// The exit status table is in tidemark --help.
func TestHelpDocumentsExitCodes(t *testing.T) {
	out, _, code := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, exitHelp) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("unknown flag"), exitUsage},
		{&exitError{kind: failed, err: errors.New("rejected")}, exitFailed},
		{&exitError{kind: usage, err: fmt.Errorf("x: %w", transport.ErrNoService)}, exitUnreachable},
		{&exitError{kind: failed, err: fmt.Errorf("x: %w", &commands.Error{Code: commands.CodeNotFound})}, exitNotFound},
		{&exitError{kind: failed, err: fmt.Errorf("x: %w", &commands.Error{Code: commands.CodeConflict})}, exitFailed},
		{&exitError{kind: failed, err: fmt.Errorf("x: %w", &commands.Error{Code: commands.CodeInvalid})}, exitUsage},
		{&exitError{kind: failed, err: fmt.Errorf("x: %w", &commands.Error{Code: commands.CodeLimit})}, exitUsage},
		{&exitError{kind: failed, err: fmt.Errorf("x: %w", &commands.Error{Code: commands.CodeUnavailable})}, exitUnreachable},
		{rejection("not_found", "no plan"), exitNotFound},
		{rejection("", "the warehouse failed"), exitFailed},
		{&exitError{kind: usage, err: &net.OpError{Op: "dial", Err: errors.New("no route to host")}}, exitUnreachable},
		{&exitError{kind: usage, err: &net.OpError{Op: "listen", Err: errors.New("address already in use")}}, exitUsage},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// scenario run --json is a deprecated alias of -o json: the same output,
// and a note on stderr.
func TestScenarioJSONAlias(t *testing.T) {
	want, _, code := runCLI(t, "scenario", "run", strictRace, "-o", "json")
	if code != 0 {
		t.Fatalf("-o json: exit %d", code)
	}
	got, stderr, code := runCLI(t, "scenario", "run", strictRace, "--json")
	if code != 0 || got != want || !strings.Contains(stderr, "--json is deprecated: use -o json") {
		t.Fatalf("--json: exit %d, stderr %q, output differs: %v", code, stderr, got != want)
	}
}

// The bench table prints small measurements (the diff rows' seconds, a
// batch's overhead in ms) with three significant digits, large ones whole.
func TestBenchFigure(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.0617: "0.0617", 1.4823: "1.48", 7.1: "7.1", 99.94: "99.9", 100: "100", 3_710_000.4: "3710000"} {
		if got := figure(v); got != want {
			t.Errorf("figure(%v) = %q, want %q", v, got, want)
		}
	}
}
