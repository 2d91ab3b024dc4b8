package main

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads url's /metrics, fails the test on any problem promlint
// finds in it (what `promtool check metrics` runs), and returns its
// families by name.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series finds the series of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f, ok := fams[name]
	if !ok {
		return nil, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			return m, true
		}
	}
	return nil, false
}

// labelOf is label name of m.
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A fresh serve's /metrics is clean by promlint, says which build runs
// and which member of the engines sharing the stream writes, and shows
// its running totals as counters named _total, at 0 before anything
// happened.
func TestMetricsAsPrometheusExpects(t *testing.T) {
	a := startServe(t)
	// A second engine on a's stream: a member that does not write.
	b := startServe(t, "--nats-url", a.nats)

	fams := scrape(t, a.http)
	for name, f := range fams {
		if counter := f.GetType() == dto.MetricType_COUNTER; counter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s", name, f.GetType())
		}
	}
	// The running totals, each label value known up front at 0.
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"tidemark_commands_total", map[string]string{"kind": "promote", "outcome": "accepted"}},
		{"tidemark_commands_total", map[string]string{"kind": "promote", "outcome": "not_found"}},
		{"tidemark_commands_total", map[string]string{"kind": "register_snapshot", "outcome": "duplicate"}},
		{"tidemark_decisions_total", map[string]string{"code": "no_gaps"}},
		{"tidemark_decisions_total", map[string]string{"code": "missing_intervals"}},
		{"tidemark_decision_outcomes_total", map[string]string{"outcome": "accepted"}},
		{"tidemark_decision_outcomes_total", map[string]string{"outcome": "rejected"}},
		{"tidemark_worker_runs_total", map[string]string{"run_kind": "backfill"}},
		{"tidemark_worker_runs_total", map[string]string{"run_kind": "scheduled"}},
		{"tidemark_work_failures_total", map[string]string{"final": "true"}},
	} {
		m, ok := series(fams, c.name, c.labels)
		if !ok || fams[c.name].GetType() != dto.MetricType_COUNTER || m.GetCounter().GetValue() != 0 {
			t.Errorf("a fresh server lacks the counter %s%v at 0 (found %v: %v)", c.name, c.labels, ok, m)
		}
	}
	bi, ok := series(fams, "tidemark_build_info", map[string]string{"goversion": runtime.Version()})
	if !ok || bi.GetGauge().GetValue() != 1 || labelOf(bi, "version") == "" {
		t.Errorf("build info: %v %v", ok, bi)
	}
	if ok && len(bi.GetLabel()) != 3 {
		t.Errorf("build info: labels %v, want version, revision, goversion", bi.GetLabel())
	}

	// a joined first: it holds the writer lease; b does not.
	var wa, wb *dto.Metric
	deadline := time.Now().Add(30 * time.Second)
	for {
		var okA, okB bool
		wa, okA = series(scrape(t, a.http), "tidemark_writer", nil)
		wb, okB = series(scrape(t, b.http), "tidemark_writer", nil)
		if !okA || !okB {
			t.Fatalf("tidemark_writer missing: a %v, b %v", okA, okB)
		}
		if wa.GetGauge().GetValue() == 1 && wb.GetGauge().GetValue() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a is not the writer alone within 30s: a %v, b %v", wa, wb)
		}
		time.Sleep(50 * time.Millisecond) // re-scraping, bounded by the deadline
	}
	if ma, mb := labelOf(wa, "member"), labelOf(wb, "member"); ma == "" || mb == "" || ma == mb {
		t.Fatalf("members named %q and %q", ma, mb)
	}
}
