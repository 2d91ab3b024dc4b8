package web

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/scenario"
)

// A rejection's page says what to do next: the smallest allowance that
// would have accepted it on the view it was evaluated on (policy re-run
// on that view, read from the log), or the catch-up to ask for; an
// accepted decision's page has no such section.
func TestDecisionNextSteps(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC)
	link := regexp.MustCompile(`href="/decisions/(\d+)">p1 → prod: REJECTED`)
	for _, c := range []struct{ file, want string }{
		{"trailing-exceeds-bound.yaml", "--max-trailing-gap-advances 2 would accept this on the same view"},
		{"trailing-exceeds-bound.yaml", "tidemark plan --env prod --set events=v2 --max-trailing-gap-advances 2</code>"},
		{"trailing-exceeds-bound.yaml", "--max-catch-up-advances 2 would catch this up"},
		{"catch-up-exceeds-bound.yaml", "tidemark plan --env prod --set events=v2 --max-catch-up-advances 2</code>"},
	} {
		_, srv := servedAt(t, c.file, at, false)
		_, home := get(t, srv.URL+"/")
		m := link.FindStringSubmatch(home)
		if m == nil {
			t.Fatalf("%s: no rejection of p1 on the dashboard:\n%s", c.file, home)
		}
		code, page := get(t, srv.URL+"/decisions/"+m[1])
		if code != 200 || !strings.Contains(page, `<section class="next-steps">`) || !strings.Contains(page, c.want) {
			t.Errorf("%s: the rejection's page (%d) lacks %q:\n%s", c.file, code, c.want, page)
		}
	}
	_, srv := servedAt(t, "trailing-gap.yaml", at, false)
	_, home := get(t, srv.URL+"/")
	m := regexp.MustCompile(`href="/decisions/(\d+)">p1 → prod: ACCEPTED`).FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("no acceptance of p1:\n%s", home)
	}
	if _, page := get(t, srv.URL+"/decisions/"+m[1]); strings.Contains(page, "next-steps") {
		t.Errorf("an acceptance's page suggests next steps:\n%s", page)
	}
}

// A rejection's page replays the log up to the view the decision read:
// a decision and its view never change, so its page is worked out once
// (the next GET, even with the log gone, is answered from it) instead of
// a whole replay per request.
func TestDecisionNextStepsOnce(t *testing.T) {
	f, err := scenario.Load("../testdata/scenarios/trailing-exceeds-bound.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := scenario.Run(t.Context(), f, scenario.Options{DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC)
	n := jstest.Node(t, natsnode.Config{DataDir: dir})
	e := jstest.Engine(t, engine.Config{Clock: func() time.Time { return at }, TrustCommandTime: true}, n)
	s := &Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet(), MinInterval: time.Millisecond}
	h, err := s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, home := get(t, srv.URL+"/")
	m := regexp.MustCompile(`href="/decisions/(\d+)">p1 → prod: REJECTED`).FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("no rejection of p1 on the dashboard:\n%s", home)
	}
	const want = "--max-trailing-gap-advances 2 would accept this on the same view"
	if code, page := get(t, srv.URL+"/decisions/"+m[1]); code != 200 || !strings.Contains(page, want) {
		t.Fatalf("the rejection's page (%d) lacks %q:\n%s", code, want, page)
	}
	n.Close() // the log is gone: a second replay would fail
	if code, page := get(t, srv.URL+"/decisions/"+m[1]); code != 200 || !strings.Contains(page, want) {
		t.Errorf("the rejection's page read again (%d) lacks %q: was it replayed again?\n%s", code, want, page)
	}
}
