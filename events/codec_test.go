package events

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/vmihailenco/msgpack/v5"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func samplePayloads() []Payload {
	r := interval.R(t0, t0.Add(time.Hour))
	return []Payload{
		SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Fingerprint: "f", Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: Incremental, DependsOn: []string{}, Table: "events@v1"},
		PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: t0, Start: t0, End: t0.Add(time.Hour), Generation: 2, Policy: Policy{Version: 1},
			Candidates: []Candidate{{Model: "events", Snapshot: "events@v2", Table: "events@v2", Upstream: []string{}, Incumbent: "events@v1", IncumbentFrontier: t0, IncumbentCron: "0 * * * *", IncumbentUnit: interval.Hour, Backfill: []interval.Range{r}}}},
		IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{r}, RunKind: RunScheduled, RunID: "x"},
		IntervalsInvalidated{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{r}},
		SchedulerAdvanced{Env: "prod", Model: "events", Snapshot: "events@v1", Tick: t0, Frontier: t0, Ranges: []interval.Range{r}, Generation: 1},
		PromotionDecided{Plan: "p1", Env: "prod", Outcome: Rejected, Codes: []string{"missing_intervals"},
			Models:         map[string]ModelFinding{"events": {Snapshot: "events@v2", Codes: []string{"missing_intervals"}, Missing: []interval.Range{r}, Advances: 1}},
			EvaluatedAtSeq: 9, EvaluatedAt: t0, Policy: Policy{Version: 1}, Generation: 1},
		EnvironmentFinalized{Env: "prod", Plan: "p1", Generation: 2},
		AuditRecorded{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{r}, Blocking: true, Work: "work-3-backfill",
			AuditOutcome: AuditOutcome{Audit: "not_null", Count: 2, Columns: []string{"id", "ts"}, Sample: [][]string{{"1", ""}, {"2", ""}}}},
		AuditRecorded{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{r}, AuditOutcome: AuditOutcome{Audit: "rows", Passed: true, Count: 40}},
		EnvironmentRolledBack{Env: "prod", FromGeneration: 2, ToGeneration: 1, Generation: 3,
			Models:         []RolledBackModel{{Model: "events", Restored: "events@v1", Table: "events@v1", Demoted: "events@v2"}},
			Repairs:        []RolledBackRepair{{Plan: "p2", Model: "events", Snapshot: "events@v2", OpenSeq: 7}},
			EvaluatedAtSeq: 9, EvaluatedAt: t0},
		RestatementRequested{Env: "prod", Model: "events", Snapshot: "events@v1", Ranges: []interval.Range{r}, Generation: 2, Run: "restate:c1",
			Work: []RestateWork{{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{r}, Invalidated: []interval.Range{r}},
				{Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{interval.R(t0.Add(-10*time.Hour), t0.Add(14*time.Hour))}, Invalidated: []interval.Range{}}},
			Reason: "source fixed"},
	}
}

func TestRoundTrip(t *testing.T) {
	ids := NewIDSource()
	for _, p := range samplePayloads() {
		t.Run(string(p.EventType()), func(t *testing.T) {
			ev := New(ids, t0, p)
			ev.Causation, ev.Actor = "cmd-1", "tester"
			b, err := Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ev) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", back, ev)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(New(NewIDSource(), t0, EnvironmentFinalized{Env: "prod", Plan: "p1"}))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(good, &m); err != nil {
		t.Fatal(err)
	}
	mutate := func(k string, v any) []byte {
		c := map[string]any{}
		for a, b := range m {
			c[a] = b
		}
		c[k] = v
		b, err := msgpack.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		in   []byte
		kind DecodeErrorKind
	}{
		{"unknown type", mutate("type", "Bogus"), UnknownType},
		{"newer schema", mutate("schema", SchemaVersion+1), UnsupportedVersion},
		{"garbage", []byte{0xc1, 0x00, 0xff}, Malformed},
		{"truncated", good[:len(good)/2], Malformed},
		{"empty", nil, Malformed},
		{"data wrong shape", mutate("data", "not a map"), Malformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.in)
			var de *DecodeError
			if !errors.As(err, &de) || de.Kind != c.kind || !errors.Is(err, ErrDecode) {
				t.Fatalf("got %v, want DecodeError kind %s", err, c.kind)
			}
		})
	}
}

func TestIDsMonotonic(t *testing.T) {
	ids := NewIDSource()
	prev := ""
	for i := 0; i < 1000; i++ {
		at := t0
		if i%3 == 0 {
			at = t0.Add(-time.Duration(i) * time.Second) // clock going back
		}
		id := ids.New(at)
		if id <= prev {
			t.Fatalf("id %d %s not after %s", i, id, prev)
		}
		prev = id
	}
}

func TestSubjects(t *testing.T) {
	if s := (IntervalsCompleted{Snapshot: "events@v1+p1"}).Subject(); s != "tidemark.evt.snap.events.v1+p1" {
		t.Fatal(s)
	}
	if ValidName("a.b") || ValidName("") || !ValidName("rollup_2") || !ValidVersion("v1+p1") {
		t.Fatal("name validation")
	}
}

// TestHandWrittenEncodersMatchReflective: the envelope's,
// IntervalsCompleted's and EnvironmentRolledBack's (and its elements')
// encoders write the reflective encoder's bytes.
func TestHandWrittenEncodersMatchReflective(t *testing.T) {
	r := interval.R(t0, t0.Add(time.Hour))
	for i, p := range []IntervalsCompleted{
		{},
		{Snapshot: "a@v1", Table: "a@v1", Ranges: []interval.Range{r}, RunKind: RunScheduled},
		{Snapshot: "a@v1", Table: "a@v0", Ranges: []interval.Range{}, RunKind: RunBackfill, RunID: "run-1"},
		{Snapshot: "a@v1", Ranges: []interval.Range{r, interval.R(t0.Add(2*time.Hour), t0.Add(300*time.Hour))}},
	} {
		fast, err1 := msgpack.Marshal(p)
		plain, err2 := msgpack.Marshal(completedPlain(p))
		if err1 != nil || err2 != nil || !bytes.Equal(fast, plain) {
			t.Fatalf("payload %d: hand-written %x (%v), reflective %x (%v)", i, fast, err1, plain, err2)
		}
	}
	for i, p := range []EnvironmentRolledBack{
		{},
		{Env: "prod", FromGeneration: 2, ToGeneration: 1, Generation: 3, Models: []RolledBackModel{}, EvaluatedAtSeq: 9, EvaluatedAt: t0},
		{Env: "prod", FromGeneration: 1 << 40, ToGeneration: 7, Generation: 1<<40 + 1,
			Models:  []RolledBackModel{{Model: "a", Restored: "a@v1", Table: "a@v1", Demoted: "a@v2"}, {Model: "b", Restored: "b@v1+p1", Table: "b@v1+p1", Demoted: "b@v2"}},
			Repairs: []RolledBackRepair{{Plan: "p2", Model: "a", Snapshot: "a@v2", OpenSeq: 1 << 33}}, EvaluatedAtSeq: 1, EvaluatedAt: t0.Add(time.Nanosecond)},
		{Env: "prod", Repairs: []RolledBackRepair{}},
		{Env: "prod", Models: []RolledBackModel{{}}, Repairs: []RolledBackRepair{{Plan: "p1", OpenSeq: 9}, {}}},
	} {
		fast, err1 := msgpack.Marshal(p)
		plain, err2 := msgpack.Marshal(rolledBackPlain(p))
		if err1 != nil || err2 != nil || !bytes.Equal(fast, plain) {
			t.Fatalf("rollback %d: hand-written %x (%v), reflective %x (%v)", i, fast, err1, plain, err2)
		}
		for j, m := range p.Models {
			fast, err1 := msgpack.Marshal(m)
			plain, err2 := msgpack.Marshal(modelPlain(m))
			if err1 != nil || err2 != nil || !bytes.Equal(fast, plain) {
				t.Fatalf("rollback %d model %d: hand-written %x (%v), reflective %x (%v)", i, j, fast, err1, plain, err2)
			}
		}
		for j, r := range p.Repairs {
			fast, err1 := msgpack.Marshal(r)
			plain, err2 := msgpack.Marshal(repairPlain(r))
			if err1 != nil || err2 != nil || !bytes.Equal(fast, plain) {
				t.Fatalf("rollback %d repair %d: hand-written %x (%v), reflective %x (%v)", i, j, fast, err1, plain, err2)
			}
		}
		// And back, as the reflective decoder reads them.
		sameAsReflective(t, fast)
	}
	for i, env := range []Envelope{
		{},
		{ID: "01J", Type: TypeIntervalsCompleted, Schema: 1, OccurredAt: t0},
		{ID: "01J", Type: TypePromotionDecided, Schema: 300, OccurredAt: t0.Add(time.Nanosecond), Causation: "c", Correlation: "p1", Actor: "worker:1"},
		{ID: "01J", Type: TypeIntervalsCompleted, Schema: 1, OccurredAt: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), Actor: "a"},
	} {
		w := wire{Envelope: env, Data: msgpack.RawMessage{0x80}}
		fast, err1 := msgpack.Marshal(&w)
		plain, err2 := msgpack.Marshal((*wirePlain)(&w))
		if err1 != nil || err2 != nil || !bytes.Equal(fast, plain) {
			t.Fatalf("envelope %d: hand-written %x (%v), reflective %x (%v)", i, fast, err1, plain, err2)
		}
	}
}

// BenchmarkCodec: the hot-path event through Encode and Decode.
func BenchmarkCodec(b *testing.B) {
	ids := NewIDSource()
	ev := New(ids, t0, IntervalsCompleted{Snapshot: "bench@v1", Table: "bench@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, RunKind: RunScheduled})
	ev.Causation = "01JCOMMAND"
	data, err := Encode(ev)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := Encode(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestHostileLengths: events whose arrays claim far more entries than the
// bytes hold are refused without allocating what they claim (msgpack
// v5.4.1 would allocate it: a few bytes took the process out of memory).
func TestHostileLengths(t *testing.T) {
	payload := func(typ Type, data []byte) []byte {
		b, err := msgpack.Marshal(&wirePlain{Envelope: Envelope{ID: "x", Type: typ, Schema: SchemaVersion, OccurredAt: t0}, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"found by the fuzzer": []byte("\x95\xa200\xa20\x81\xdd]s\xde?"),
		"candidates":          payload(TypePlanBuilt, []byte("\x81\xaacandidates\xdd\x5d\x73\xde\x3f\xc0")),
		"ranges as an array":  payload(TypeIntervalsCompleted, []byte("\x93\xa1a\xa1a\xdd\x5d\x73\xde\x3f\xc0")),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("%s: decoded (%v)", name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
			t.Fatalf("%s: decoding allocated %d MiB", name, got>>20)
		}
	}
}

// AppendEncode writes the payload in place as the envelope's data: the
// bytes are those of the payload encoded apart and carried as raw data,
// for every event type, and they follow what dst held.
func TestAppendEncodeOnePass(t *testing.T) {
	ids := NewIDSource()
	for _, p := range samplePayloads() {
		ev := New(ids, t0, p)
		ev.Causation, ev.Actor, ev.Digest = "cmd-1", "tester", "d"
		data, err := msgpack.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		w := wire{Envelope: ev.Envelope, Data: data}
		want, err := msgpack.Marshal(&w)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendEncode([]byte("prefix"), ev)
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("%s: one pass %x (%v), two passes %x", p.EventType(), got, err, want)
		}
	}
}

// A version's grain round-trips; without one, the event has no grain key
// (its bytes are what they were before the field existed).
func TestSnapshotRegisteredGrain(t *testing.T) {
	ids := NewIDSource()
	base := SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Fingerprint: "f", Cron: "0 * * * *", Unit: interval.Hour,
		Start: t0, Kind: Incremental, DependsOn: []string{}, Table: "events@v1", SQL: "SELECT 1", TimeColumn: "ts"}
	plain, err := msgpack.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("grain")) {
		t.Fatalf("an event without a grain writes the key: %q", plain)
	}
	withGrain := base
	withGrain.Grain = []string{"id", "ts"}
	ev := New(ids, t0, withGrain)
	b, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ev) || !bytes.Contains(b, []byte("grain")) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", back, ev)
	}
}
