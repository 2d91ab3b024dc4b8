package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQualifiedModelsForReal: schema-qualified models through the CLI:
// apply registers sushi.page_views and sushi.rollup (which reads
// "sushi.page_views", checked by sqlcheck on both sides), plan takes
// --set sushi.page_views=VERSION, the promotion puts their views in
// schema sushi__prod, query reads them there, and verify names them so.
func TestQualifiedModelsForReal(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	start := deployPageViews(t, s, "sushi", "q1")
	hours := int(time.Now().UTC().Truncate(time.Hour).Sub(start) / time.Hour)
	want := "n\n" + strconv.Itoa(60*hours) + "\n"
	eventually(t, "sushi__prod.page_views reads the promoted table", time.Minute, func() bool {
		out, _, code := runCLI(t, "query", "SELECT count(*) AS n FROM sushi__prod.page_views", "--nats-url", s.nats, "-o", "csv")
		return code == 0 && out == want
	})
	eventually(t, "sushi__prod.rollup is computed", time.Minute, func() bool {
		out, _, code := runCLI(t, "query", "SELECT sum(views) AS total FROM sushi__prod.rollup", "--nats-url", s.nats, "-o", "json")
		return code == 0 && strings.Contains(out, `"total":2880`)
	})
	out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "sushi__prod.page_views: ok") || !strings.Contains(out, "sushi__prod.rollup: ok") {
		t.Fatalf("verify: exit %d %s %s", code, out, stderr)
	}
	if _, _, code := runCLI(t, "query", "SELECT count(*) FROM prod.page_views", "--nats-url", s.nats); code == 0 {
		t.Fatal("a qualified model's view is also in the env's own schema")
	}
}
