package web

import (
	"strings"
	"testing"
	"time"
)

// A model whose frontier trails its readiness frontier by more than its
// freshness bound is marked LATE on its row, with why; the cause is the
// missing worker when the server's roster has none.
func TestDashboardLate(t *testing.T) {
	const file = "stale-scheduler-after-promotion.yaml" // events@v2's frontier: 12:00
	for _, c := range []struct {
		name   string
		at     time.Time
		roster bool
		want   []string
		not    []string
	}{
		{"at the bound", time.Date(2026, 12, 1, 13, 30, 0, 0, time.UTC), true,
			[]string{`data-snapshot="events@v2" data-late="false"`, `<td class="state">ok</td>`}, []string{"LATE"}},
		{"late, no roster", time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), false,
			[]string{`data-snapshot="events@v2" data-late="true" class="late"`, `<b class="late" data-cause="">LATE</b>`,
				"frontier 2026-12-01T12:00:00Z is behind its readiness frontier 2026-12-01T14:00:00Z by more than 1 interval"}, nil},
		{"late, no worker", time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), true,
			[]string{`data-late="true" class="late"`, `<b class="late" data-cause="no_worker">LATE · no_worker</b>`, "no worker heartbeat"}, nil},
	} {
		_, srv := servedAt(t, file, c.at, c.roster)
		code, page := get(t, srv.URL+"/")
		for _, w := range c.want {
			if code != 200 || !strings.Contains(page, w) {
				t.Errorf("%s: the dashboard (%d) lacks %q", c.name, code, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(page, w) {
				t.Errorf("%s: the dashboard shows %q", c.name, w)
			}
		}
	}
}
