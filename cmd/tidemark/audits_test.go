package main

import (
	"strings"
	"testing"
)

// status names an incumbent's failed audit, the audit trail lists every
// audit result, and audit explain a candidate's failed audits, after a
// scenario that promoted a version whose non-blocking audit failed.
func TestStatusShowsFailedAudits(t *testing.T) {
	dir := scenarioDir(t, "audit-non-blocking-warning.yaml")
	out, stderr, code := runCLI(t, "status", "--data-dir", dir)
	want := "failed audit: prod events@v2, number_of_rows (non-blocking: warns) failed on [2026-12-01T02:00:00Z/2026-12-01T04:00:00Z], 0 violating rows"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("status: exit %d %s\n%s", code, stderr, out)
	}
	out, _, code = runCLI(t, "audit", "--data-dir", dir, "--model", "sessions")
	if code != 0 || !strings.Contains(out, "sessions@v2 blocking audit unique_values failed over [2026-12-01T00:00:00Z/2026-12-01T02:00:00Z]: 2 violating rows") {
		t.Fatalf("audit: exit %d\n%s", code, out)
	}
	// audit explain shows the candidate's failed audits the decision saw,
	// under its coverage, in its table output as in its JSON.
	out, _, code = runCLI(t, "audit", "explain", "p2", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "    failed audit: unique_values (blocking) on [2026-12-01T00:00:00Z/2026-12-01T02:00:00Z]: 2 violating rows") {
		t.Fatalf("audit explain: exit %d\n%s", code, out)
	}
}
