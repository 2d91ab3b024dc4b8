package events

import (
	"errors"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/vmihailenco/msgpack/v5"
)

// Times outside [MinTime, MaxTime] are neither written nor read: Decode
// names the field, Encode refuses.
func TestTimeRange(t *testing.T) {
	y10001 := time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		at    time.Time
		p     Payload
		field string
	}{
		{y10001, EnvironmentFinalized{Env: "prod", Plan: "p1"}, "at"},
		{time.Unix(-1, 0), EnvironmentFinalized{Env: "prod", Plan: "p1"}, "at"},
		{t0, IntervalsCompleted{Snapshot: "a@v1", Table: "a@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour)), interval.R(t0, y10001)}, RunKind: RunManual}, "data.ranges[1].end"},
		{t0, SchedulerAdvanced{Env: "prod", Model: "a", Snapshot: "a@v1", Tick: MaxTime.Add(time.Second), Generation: 1}, "data.tick"},
		{t0, PlanBuilt{Plan: "p", Env: "prod", BuiltAt: t0, Candidates: []Candidate{{Model: "a", IncumbentFrontier: y10001}}}, "data.candidates[0].incumbent_frontier"},
		{t0, SnapshotRegistered{Snapshot: "a@v1", Model: "a", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: MinTime.Add(-time.Hour)}, "data.start"},
	}
	for _, c := range cases {
		// (New would panic on a time before 1970: a ULID has no room for it.)
		ev := Event{Envelope: Envelope{ID: "01KBC5Y3ZP8V3M1Q2R4S5T6V7W", Type: c.p.EventType(), Schema: SchemaVersion, OccurredAt: c.at}, Payload: c.p}
		if _, err := Encode(ev); err == nil {
			t.Errorf("%s: Encode accepted a time out of range", c.field)
		}
		data, err := msgpack.Marshal(c.p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := msgpack.Marshal(&wire{Envelope: ev.Envelope, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(b)
		var de *DecodeError
		if !errors.As(err, &de) || de.Kind != OutOfRange || de.Field != c.field || !errors.Is(err, ErrDecode) {
			t.Errorf("%s: Decode says %v", c.field, err)
		}
	}
	// The bounds themselves are in range; unset optional times are fine.
	ok := New(NewIDSource(), MaxTime, PlanBuilt{Plan: "p", Env: "prod", BuiltAt: MinTime, Candidates: []Candidate{{Model: "a"}}})
	b, err := Encode(ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
}
