package web

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/models"
)

// The dashboard shows an incumbent's failed audit in its row, and a plan
// in flight's failed blocking audit (which will reject it) in its line.
func TestDashboardFailedAudits(t *testing.T) {
	_, srv := served(t, "audit-non-blocking-warning.yaml")
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(page, `<div class="audit" data-audit="number_of_rows" data-blocking="false">events@v2: audit number_of_rows (non-blocking: warns) failed on [2026-12-01T02:00:00Z/2026-12-01T04:00:00Z], 0 violating rows</div>`) {
		t.Fatalf("the page lacks events@v2's failed audit:\n%s", page)
	}

	e := jstest.Engine(t, engine.Config{TrustCommandTime: true})
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	meta := func() commands.Meta { return commands.Meta{ID: commands.NewID(), At: at} }
	handle := func(c commands.Command) {
		if err := e.Handle(t.Context(), c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	handle(&commands.RegisterSnapshot{Meta: meta(), Model: "events", Version: "v1", Cron: "@hourly", Start: at.Add(-4 * time.Hour),
		Audits: []models.Audit{{Name: "ids", Kind: models.AuditNotNull, Columns: []string{"id"}}}})
	handle(&commands.BuildPlan{Meta: meta(), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1"}})
	handle(&commands.CompleteIntervals{Meta: meta(), Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(at.Add(-4*time.Hour), at.Add(-3*time.Hour))},
		Audits: []events.AuditOutcome{{Audit: "ids", Count: 2}}})
	h, err := (&Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet()}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(h)
	defer srv2.Close()
	_, page = get(t, srv2.URL+"/")
	if !strings.Contains(page, `<div class="audit" data-snapshot="events@v1" data-audit="ids" data-blocking="true">events@v1: audit ids (blocking: rejects a promotion) failed on [2026-12-01T00:00:00Z/2026-12-01T01:00:00Z], 2 violating rows</div>`) {
		t.Fatalf("p1's failed audit is not shown in flight:\n%s", page)
	}
}
