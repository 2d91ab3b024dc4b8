package web

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every coverage bar of the dashboard spans one time axis, the window
// the page asks for (?window=24h, the default, 7d or all) ending at the
// clock; the live stream renders the same window; another window is
// refused, naming the choices.
func TestDashboardSharedAxis(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	_, srv := servedAt(t, "trailing-downstream-clean.yaml", at, false)
	spans := regexp.MustCompile(`<svg class="timeline"[^>]* data-start="([^"]+)" data-end="([^"]+)"`)
	for _, c := range []struct{ query, start, current string }{
		{"", "2026-11-30T12:00:00Z", "24h"}, {"?window=24h", "2026-11-30T12:00:00Z", "24h"},
		{"?window=7d", "2026-11-24T12:00:00Z", "7d"}, {"?window=all", "2026-12-01T00:00:00Z", "all"},
	} {
		code, page := get(t, srv.URL+"/"+c.query)
		bars := spans.FindAllStringSubmatch(page, -1)
		if code != 200 || len(bars) < 2 {
			t.Fatalf("%q: %d, %d bars:\n%s", c.query, code, len(bars), page)
		}
		for _, b := range bars {
			if b[1] != c.start || b[2] != "2026-12-01T12:00:00Z" {
				t.Errorf("%q: a bar spans %s to %s, want %s to 2026-12-01T12:00:00Z", c.query, b[1], b[2], c.start)
			}
		}
		if !strings.Contains(page, `<b class="window" data-window="`+c.current+`">`) {
			t.Errorf("%q: the window %s is not marked current", c.query, c.current)
		}
	}
	for _, path := range []string{"/?window=1y", "/fragment?window=1y", "/live?window=1y"} {
		if code, body := get(t, srv.URL+path); code != 400 || !strings.Contains(body, `window "1y": want 24h, 7d or all`) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, body := get(t, srv.URL+"/fragment?window=7d"); code != 200 || !strings.Contains(body, `data-start="2026-11-24T12:00:00Z"`) {
		t.Errorf("fragment of 7d: %d", code)
	}
}
