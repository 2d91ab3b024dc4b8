package main

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/jstest"
)

// exitCase is one run of the CLI and the exit status it must end with,
// its stderr saying say.
type exitCase struct {
	name string
	args []string
	code int
	say  string
}

func checkExits(t *testing.T, cases []exitCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.say) {
				t.Fatalf("%v: exit %d, want %d saying %q: %s", c.args, code, c.code, c.say, stderr)
			}
		})
	}
}

// TestExitTable runs every verb's error paths against real servers: the
// exit status follows the README's table wherever the failure is found
// (in the CLI, by the engine, by the warehouse).
func TestExitTable(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	deployPageViews(t, s, "", "d1")
	u := s.nats
	dir := t.TempDir()
	badCron := filepath.Join(dir, "bad-cron.yaml")
	os.WriteFile(badCron, []byte("models:\n  - name: x\n    version: v1\n    cron: \"every hour\"\n    start: 2026-12-01T00:00:00Z\n"), 0o644)
	hour := time.Now().UTC().Truncate(time.Hour).Add(240 * time.Hour)
	future := hour.Format(time.RFC3339) + "/" + hour.Add(time.Hour).Format(time.RFC3339)

	t.Run("invalid input", func(t *testing.T) {
		checkExits(t, []exitCase{
			// Found by the CLI.
			{"bad flag", []string{"promote", "d1", "--bogus", "--nats-url", u}, exitUsage, "unknown flag"},
			{"missing arg", []string{"explain", "--nats-url", u}, exitUsage, "accepts 1 arg"},
			{"bad --set", []string{"plan", "--env", "prod", "--set", "page_views", "--nats-url", u}, exitUsage, "want MODEL=VERSION"},
			{"apply without -f", []string{"apply", "--nats-url", u}, exitUsage, "-f is required"},
			{"apply bad cron", []string{"apply", "-f", badCron, "--nats-url", u}, exitUsage, "cron"},
			{"events get not a seq", []string{"events", "get", "x", "--nats-url", u}, exitUsage, "want a stream sequence"},
			{"restate without range", []string{"restate", "--env", "prod", "--model", "page_views", "--nats-url", u}, exitUsage, "--range is required"},
			{"audit bad time", []string{"audit", "--since", "yesterday", "--nats-url", u}, exitUsage, "--since: want RFC 3339"},
			{"events tail bad from", []string{"events", "tail", "--from", "x", "--nats-url", u}, exitUsage, "--from"},
			{"worker without a way to compute", []string{"worker", "--nats-url", u}, exitUsage, "exactly one of --exec"},
			{"scenario file missing", []string{"scenario", "run", filepath.Join(dir, "none.yaml")}, exitUsage, "none.yaml"},
			{"replay of no data dir", []string{"replay", "--data-dir", filepath.Join(dir, "none")}, exitUsage, "none"},
			// Found by the server.
			{"plan bad version", []string{"plan", "--env", "prod", "--set", "page_views=v 1", "--nats-url", u}, exitUsage, "invalid"},
			{"plan bad env", []string{"plan", "--env", "pr od", "--set", "page_views=v1", "--nats-url", u}, exitUsage, "invalid: env"},
			{"promote bad plan name", []string{"promote", "p 1", "--nats-url", u}, exitUsage, "invalid: plan"},
			{"cancel bad reason", []string{"plan", "cancel", "d1", "--reason", "a\tb", "--nats-url", u}, exitUsage, "invalid: reason"},
			{"restate covering nothing", []string{"restate", "--env", "prod", "--model", "page_views", "--range", future, "--nats-url", u}, exitUsage, "covers nothing of"},
			{"query that writes", []string{"query", "DELETE FROM prod.page_views", "--nats-url", u}, exitUsage, ""},
		})
	})
	t.Run("not found", func(t *testing.T) {
		checkExits(t, []exitCase{
			{"verify unknown env", []string{"verify", "--env", "nope", "--nats-url", u}, exitNotFound, `no environment "nope"`},
			{"verify unknown model", []string{"verify", "--env", "prod", "--model", "nope", "--nats-url", u}, exitNotFound, "nope"},
			{"promote unknown plan", []string{"promote", "nope", "--nats-url", u}, exitNotFound, "not_found"},
			{"cancel unknown plan", []string{"plan", "cancel", "nope", "--nats-url", u}, exitNotFound, "not_found"},
			{"plan unknown version", []string{"plan", "--env", "prod", "--set", "page_views=nope", "--nats-url", u}, exitNotFound, "not_found"},
			{"diff unknown plan", []string{"diff", "nope", "--nats-url", u}, exitNotFound, "nope"},
			{"diff unknown model", []string{"diff", "d1", "--model", "nope", "--nats-url", u}, exitNotFound, "nope"},
			{"explain unknown plan", []string{"explain", "nope", "--nats-url", u}, exitNotFound, "nope"},
			{"audit explain unknown plan", []string{"audit", "explain", "nope", "--nats-url", u}, exitNotFound, "nope"},
			{"events get unknown seq", []string{"events", "get", "999999", "--nats-url", u}, exitNotFound, "999999"},
			{"rollback unknown env", []string{"rollback", "--env", "nope", "--nats-url", u}, exitNotFound, "not_found"},
			{"status unknown env", []string{"status", "--env", "nope", "--nats-url", u}, exitNotFound, "not_found"},
			{"repairs unknown env", []string{"repairs", "--env", "nope", "--nats-url", u}, exitNotFound, "not_found"},
			{"status beyond the stream", []string{"status", "--at-seq", "999999", "--nats-url", u}, exitNotFound, "--at-seq 999999: the stream ends at seq"},
			{"restate unknown env", []string{"restate", "--env", "nope", "--model", "page_views", "--range", future, "--nats-url", u}, exitNotFound, "not_found"},
			{"restate unknown model", []string{"restate", "--env", "prod", "--model", "nope", "--range", future, "--nats-url", u}, exitNotFound, "not_found"},
		})
	})
	t.Run("rejected", func(t *testing.T) {
		checkExits(t, []exitCase{
			{"cancel a promoted plan", []string{"plan", "cancel", "d1", "--nats-url", u}, exitFailed, "conflict"},
			{"plan id taken", []string{"plan", "--env", "prod", "--id", "d1", "--set", "page_views=nope", "--nats-url", u}, exitFailed, "already exists"},
			{"rollback to a generation not there", []string{"rollback", "--env", "prod", "--to", "7", "--nats-url", u}, exitFailed, "to_generation"},
		})
	})

	// Nothing listens: every verb that talks to a server exits 4; a
	// server without tidemark on it too.
	closed := closedPort(t)
	node := jstest.Node(t)
	var unreachable []exitCase
	for _, args := range [][]string{{"status"}, {"plan", "--env", "prod", "--set", "a=v1"}, {"plan", "cancel", "p1"}, {"promote", "p1"},
		{"apply", "-f", badCron}, {"verify"}, {"diff", "p1"}, {"query", "SELECT 1"}, {"explain", "p1"}, {"audit", "explain", "p1"},
		{"events", "get", "1"}, {"rollback", "--env", "prod"}, {"restate", "--env", "prod", "--model", "m", "--range", future}, {"repairs"}} {
		if args[0] == "apply" {
			continue // apply refuses the bad file first
		}
		unreachable = append(unreachable, exitCase{strings.Join(args, " ") + " closed", append(args, "--nats-url", closed), exitUnreachable, ""})
	}
	for _, args := range [][]string{{"status"}, {"promote", "p1"}, {"plan", "--env", "prod", "--set", "a=v1"}, {"verify"}, {"diff", "p1"}, {"query", "SELECT 1"}} {
		unreachable = append(unreachable, exitCase{strings.Join(args, " ") + " no service", append(args, "--nats-url", node.ClientURL()), exitUnreachable, ""})
	}
	t.Run("unreachable", func(t *testing.T) { checkExits(t, unreachable) })
}

// A promotion the policy rejects exits 1 (a server without a worker: the
// backfill stays missing), and plan --wait giving up too.
func TestExitRejectedPromotion(t *testing.T) {
	s := startServe(t)
	models := filepath.Join(t.TempDir(), "models.yaml")
	start := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	os.WriteFile(models, []byte("models:\n  - name: events\n    version: v1\n    cron: \"@hourly\"\n    start: "+start.Format(time.RFC3339)+"\n"), 0o644)
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events=v1", "--id", "r1", "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	checkExits(t, []exitCase{
		{"promote rejected", []string{"promote", "r1", "--nats-url", s.nats}, exitFailed, "promotion of r1 rejected"},
	})

	// The decision's page says how to re-check it from the log: that
	// command runs, and explains this decision.
	var page string
	eventually(t, "the dashboard links the decision", 30*time.Second, func() bool {
		m := regexp.MustCompile(`/decisions/[0-9]+`).FindString(get(t, s.http+"/"))
		if m != "" {
			page = get(t, s.http+m)
		}
		return m != ""
	})
	m := regexp.MustCompile(`Re-check it from the log: <code>([^<]*)</code>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the decision page prints no command to re-check it:\n%s", page)
	}
	args := strings.Fields(html.UnescapeString(m[1]))
	if len(args) < 2 || args[0] != "tidemark" {
		t.Fatalf("the page prints %q", m[1])
	}
	out, stderr, code := runCLI(t, append(args[1:], "--nats-url", s.nats)...)
	if code != exitOK || !strings.Contains(out, "plan r1 for prod") || !strings.Contains(out, "REJECTED") {
		t.Fatalf("%s: exit %d %s %s", m[1], code, out, stderr)
	}

	// Decided again, the first decision's page still prints a command
	// that explains that decision, not the plan's latest.
	first := regexp.MustCompile(`/decisions/([0-9]+)`).FindStringSubmatch(get(t, s.http+"/"))
	if first == nil {
		t.Fatal("the dashboard links no decision")
	}
	seq := first[1]
	checkExits(t, []exitCase{
		{"promote rejected again", []string{"promote", "r1", "--nats-url", s.nats}, exitFailed, "promotion of r1 rejected"},
	})
	page = get(t, s.http+"/decisions/"+seq)
	m = regexp.MustCompile(`Re-check it from the log: <code>([^<]*)</code>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the first decision's page prints no command:\n%s", page)
	}
	args = strings.Fields(html.UnescapeString(m[1]))
	out, stderr, code = runCLI(t, append(args[1:], "--nats-url", s.nats)...)
	if code != exitOK || !strings.Contains(out, "decision at seq "+seq+":") {
		t.Fatalf("%s (the decision at seq %s): exit %d %s %s", m[1], seq, code, out, stderr)
	}
}
