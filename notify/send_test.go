package notify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// gather is every series of reg by name and labels (name{k="v",…}) with
// its value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			out[name] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestSendRounds: a failing endpoint gets Attempts attempts per round;
// when a round is exhausted the notifier says so in the log (an error)
// and, after Pause, sends the same notice again with the same key, until
// it is acknowledged: nothing is dropped. A 4xx other than 408, 425 and
// 429 refuses the notice for good (logged; sent once).
func TestSendRounds(t *testing.T) {
	for _, c := range []struct {
		name   string
		codes  []int // answers, in order; then 200
		sent   int
		rounds int // "attempts exhausted" errors logged
		logged string
	}{
		{name: "5xx then 200", codes: []int{500, 503, 502, 500, 500}, sent: 6, rounds: 2, logged: "attempts exhausted"},
		{name: "429 and 408 retried", codes: []int{429, 408}, sent: 3, rounds: 1, logged: "attempts exhausted"},
		{name: "400 refused", codes: []int{400}, sent: 1, logged: "refused by the endpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys)
				mu.Unlock()
				if n <= len(c.codes) {
					w.WriteHeader(c.codes[n-1])
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			buf := &logBuffer{}
			log := slog.New(slog.NewTextHandler(buf, nil))
			n := &Notifier{URL: srv.URL, Attempts: 2, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Pause: time.Millisecond}
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			n.SetMetrics(m)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := n.send(ctx, log, &Notice{Kind: KindPromotion, Key: "tidemark-7", Seq: 7}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(keys) != c.sent {
				t.Fatalf("sent %d times, want %d", len(keys), c.sent)
			}
			for _, k := range keys {
				if k != "tidemark-7" {
					t.Fatalf("keys %v", keys)
				}
			}
			out := buf.String()
			if got := strings.Count(out, "attempts exhausted"); got != c.rounds || !strings.Contains(out, c.logged) {
				t.Fatalf("%d rounds exhausted, want %d; log:\n%s", got, c.rounds, out)
			}
			delivered, refused := 1, 0
			if c.codes[0] == 400 {
				delivered, refused = 0, 1
			}
			got := gather(t, reg)
			for series, n := range map[string]int{
				"tidemark_notification_failures_total":                                       c.sent - delivered - refused,
				`tidemark_notifications_total{kind="promotion_decided",outcome="delivered"}`: delivered,
				`tidemark_notifications_total{kind="promotion_decided",outcome="refused"}`:   refused,
				`tidemark_notifications_total{kind="late",outcome="delivered"}`:              0,
			} {
				if v, ok := got[series]; !ok || v != float64(n) {
					t.Errorf("%s = %v (present %v), want %d", series, v, ok, n)
				}
			}
			if len(got) != 13 {
				t.Errorf("%d series, want 13 (every kind and outcome from the start): %v", len(got), got)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if probs, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(probs) > 0 {
				t.Errorf("promlint: %v %v", probs, err)
			}
		})
	}
}

// logBuffer is a log's output, written and read from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSendStopsWithItsContext: a hung endpoint holds send only until its
// context ends.
func TestSendStopsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	n := &Notifier{URL: srv.URL, Attempts: 1, Pause: time.Hour, Client: &http.Client{}}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.send(ctx, slog.New(slog.DiscardHandler), &Notice{Key: "k"}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("send returned nil on a hung endpoint")
		}
	case <-time.After(time.Minute):
		t.Fatal("send did not return when its context ended")
	}
}

// A webhook URL's path and query are often its secret (a chat service's
// hook token): a failed attempt's log line names the endpoint by its
// scheme and host only.
func TestSendLogsNoURLSecret(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first { // a network error: the connection dropped
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	buf := &logBuffer{}
	log := slog.New(slog.NewTextHandler(buf, nil))
	n := &Notifier{URL: srv.URL + "/hooks/T0/S3CRET?token=T0K3N", Attempts: 2, Backoff: time.Millisecond, Pause: time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := n.send(ctx, log, &Notice{Kind: KindPromotion, Key: "tidemark-7", Seq: 7}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "not delivered") || !strings.Contains(out, strings.TrimPrefix(srv.URL, "http://")) {
		t.Fatalf("no failed attempt naming the endpoint's host logged:\n%s", out)
	}
	if strings.Contains(out, "S3CRET") || strings.Contains(out, "T0K3N") {
		t.Errorf("the log shows the URL's secret:\n%s", out)
	}
}

// A Notifier without a Log follows nothing: Prepare refuses it, naming
// the field (Run prepares first, so it logs that and tries again after
// Pause).
func TestNotifierWithoutLog(t *testing.T) {
	n := &Notifier{URL: "http://127.0.0.1:1/", Pause: time.Millisecond}
	if err := n.Prepare(t.Context()); err == nil || !strings.Contains(err.Error(), "Notifier.Log") {
		t.Errorf("Prepare = %v, want a refusal naming Notifier.Log", err)
	}
}
