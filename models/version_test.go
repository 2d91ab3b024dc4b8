package models

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
)

// Stored fingerprints are compared with new ones: the function's output is
// part of the stored state and must not change.
func TestFingerprintGolden(t *testing.T) {
	r := events.SnapshotRegistered{Model: "sessions", Cron: "@hourly", Unit: "hour",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Lookback: 2, Kind: events.Incremental,
		DependsOn: []string{"users", "events"}, Upstream: []string{"events@v1"}}
	if got, want := Fingerprint(r), "99655dd3e39ab333"; got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
	r.Cron = "0 * * * *" // descriptors are expanded: the same schedule
	if got, want := Fingerprint(r), "99655dd3e39ab333"; got != want {
		t.Errorf("Fingerprint of the expanded cron = %s, want %s", got, want)
	}
}

// A version with SQL: its query (hashed, exactly as given) and time column
// are part of the input, which is otherwise the one above, so versions
// without SQL keep their fingerprints.
func TestFingerprintGoldenSQL(t *testing.T) {
	r := events.SnapshotRegistered{Model: "sessions", Cron: "@hourly", Unit: "hour",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Lookback: 2, Kind: events.Incremental,
		DependsOn: []string{"users", "events"}, Upstream: []string{"events@v1"},
		SQL:        "SELECT user_id, ts FROM events WHERE ts >= @start_ts AND ts < @end_ts\n",
		TimeColumn: "ts"}
	if got, want := Fingerprint(r), "85f68048d60a53c4"; got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
	if got, want := ContentVersion(r), "d85f68048d6"; got != want {
		t.Errorf("ContentVersion = %s, want %s", got, want)
	}
	seen := map[string]string{Fingerprint(r): "base"}
	for name, edit := range map[string]func(*events.SnapshotRegistered){
		"no sql":           func(r *events.SnapshotRegistered) { r.SQL, r.TimeColumn = "", "" },
		"another column":   func(r *events.SnapshotRegistered) { r.TimeColumn = "event_ts" },
		"another query":    func(r *events.SnapshotRegistered) { r.SQL = strings.Replace(r.SQL, "user_id", "session_id", 1) },
		"trailing newline": func(r *events.SnapshotRegistered) { r.SQL = strings.TrimSuffix(r.SQL, "\n") },
	} {
		c := r
		edit(&c)
		fp := Fingerprint(c)
		if prev, dup := seen[fp]; dup {
			t.Errorf("%s has the fingerprint of %s", name, prev)
		}
		seen[fp] = name
	}
}

func TestDerivedVersion(t *testing.T) {
	for _, c := range []struct{ inc, plan, want string }{
		{"v1", "p1", "v1+p1"},
		{"v1+p1", "p2", "v1+p2"},
		{"v1+p1", "p1", "v1+p1"},
		{"d0123456789+01JDEPLOY", "01JNEXT", "d0123456789+01JNEXT"},
	} {
		if got := DerivedVersion(c.inc, c.plan); got != c.want {
			t.Errorf("DerivedVersion(%q, %q) = %q, want %q", c.inc, c.plan, got, c.want)
		}
	}
	// Derived names never grow: a hundred plans in a row keep the length.
	v := "v1"
	for i := 0; i < 100; i++ {
		v = DerivedVersion(v, "01JDEFAULTPLANIDULIDXXXXXX")
	}
	if v != "v1+01JDEFAULTPLANIDULIDXXXXXX" {
		t.Errorf("after 100 plans: %q", v)
	}
}

// batch_size and batch_concurrency enter the fingerprint only when set:
// the goldens above (without them) are unchanged, and each one set gives
// a new fingerprint, pinned here.
func TestFingerprintGoldenBatch(t *testing.T) {
	r := events.SnapshotRegistered{Model: "sessions", Cron: "@hourly", Unit: "hour",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Lookback: 2, Kind: events.Incremental,
		DependsOn: []string{"users", "events"}, Upstream: []string{"events@v1"},
		SQL:        "SELECT user_id, ts FROM events WHERE ts >= @start_ts AND ts < @end_ts\n",
		TimeColumn: "ts"}
	seen := map[string]string{Fingerprint(r): "none"}
	for name, edit := range map[string]func(*events.SnapshotRegistered){
		"size":        func(r *events.SnapshotRegistered) { r.BatchSize = 168 },
		"concurrency": func(r *events.SnapshotRegistered) { r.BatchConcurrency = 4 },
		"both":        func(r *events.SnapshotRegistered) { r.BatchSize, r.BatchConcurrency = 168, 4 },
		"other size":  func(r *events.SnapshotRegistered) { r.BatchSize = 24 },
	} {
		c := r
		edit(&c)
		fp := Fingerprint(c)
		if prev, dup := seen[fp]; dup {
			t.Errorf("%s has the fingerprint of %s", name, prev)
		}
		seen[fp] = name
	}
	r.BatchSize, r.BatchConcurrency = 168, 4
	if got, want := Fingerprint(r), "fb977f7bab971039"; got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func TestValidateBatch(t *testing.T) {
	d := Definition{Model: "m", Cron: "@hourly", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	for _, c := range []struct {
		size, conc int
		field      string
	}{{0, 0, ""}, {1, 1, ""}, {168, 64, ""}, {-1, 0, "batch_size"}, {MaxBatchSize + 1, 0, "batch_size"}, {0, -1, "batch_concurrency"}, {0, 65, "batch_concurrency"}} {
		d.BatchSize, d.BatchConcurrency = c.size, c.conc
		err := d.Validate()
		var field string
		if fe, ok := err.(*FieldError); ok {
			field = fe.Field
		}
		if field != c.field {
			t.Errorf("batch_size %d, batch_concurrency %d: %v, want an error on %q", c.size, c.conc, err, c.field)
		}
	}
}

// A grain enters the fingerprint only when set (the goldens above are
// unchanged), in its order; pinned here.
func TestFingerprintGoldenGrain(t *testing.T) {
	r := events.SnapshotRegistered{Model: "sessions", Cron: "@hourly", Unit: "hour",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Kind: events.Incremental,
		SQL: "SELECT user_id, ts FROM events WHERE ts >= @start_ts AND ts < @end_ts\n", TimeColumn: "ts"}
	none := Fingerprint(r)
	r.Grain = []string{}
	if Fingerprint(r) != none {
		t.Fatal("an empty grain changed the fingerprint")
	}
	r.Grain = []string{"user_id", "ts"}
	a := Fingerprint(r)
	r.Grain = []string{"ts", "user_id"}
	if b := Fingerprint(r); a == none || b == a {
		t.Fatalf("fingerprints: none %s, [user_id ts] %s, [ts user_id] %s", none, a, b)
	}
	if want := "3169910e98d058ae"; a != want {
		t.Errorf("Fingerprint = %s, want %s", a, want)
	}
}

func TestValidateGrain(t *testing.T) {
	d := Definition{Model: "m", Cron: "@hourly", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), SQL: "SELECT 1 AS id, @start_ts AS ts", TimeColumn: "ts"}
	many := make([]string, MaxGrain+1)
	for i := range many {
		many[i] = "c" + strings.Repeat("x", i)
	}
	for _, c := range []struct {
		grain []string
		noSQL bool
		field string
	}{
		{nil, false, ""}, {[]string{"id"}, false, ""}, {[]string{"id", "ts"}, false, ""}, {many[:MaxGrain], false, ""},
		{many, false, "grain"}, {[]string{"id", "ts", "id"}, false, "grain[2]"}, {[]string{"id", "a b"}, false, "grain[1]"},
		{[]string{""}, false, "grain[0]"}, {[]string{"id"}, true, "grain"},
	} {
		d := d
		d.Grain = c.grain
		if c.noSQL {
			d.SQL, d.TimeColumn = "", ""
		}
		err := d.Validate()
		var field string
		if fe, ok := err.(*FieldError); ok {
			field = fe.Field
		}
		if field != c.field {
			t.Errorf("grain %q (no sql %t): %v, want an error on %q", c.grain, c.noSQL, err, c.field)
		}
	}
}
