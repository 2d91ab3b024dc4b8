package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/vmihailenco/msgpack/v5"
)

// snapshotRegisteredBeforeSQL is SnapshotRegistered as it was before a
// version could carry SQL.
type snapshotRegisteredBeforeSQL struct {
	Snapshot      string        `msgpack:"snapshot" json:"snapshot"`
	Model         string        `msgpack:"model" json:"model"`
	Version       string        `msgpack:"version" json:"version"`
	Fingerprint   string        `msgpack:"fingerprint" json:"fingerprint"`
	Cron          string        `msgpack:"cron" json:"cron"`
	Unit          interval.Unit `msgpack:"unit" json:"unit"`
	Start         time.Time     `msgpack:"start" json:"start"`
	Lookback      int           `msgpack:"lookback" json:"lookback"`
	Kind          Kind          `msgpack:"kind" json:"kind"`
	AllowPartials bool          `msgpack:"allow_partials" json:"allow_partials"`
	DependsOn     []string      `msgpack:"depends_on" json:"depends_on"`
	Upstream      []string      `msgpack:"upstream,omitempty" json:"upstream,omitempty"`
	Table         string        `msgpack:"table" json:"table"`
}

// A version without SQL encodes byte for byte as before (sql and
// time_column are omitted); one with SQL round-trips.
func TestSnapshotRegisteredSQL(t *testing.T) {
	p := SnapshotRegistered{Snapshot: "s@v1", Model: "s", Version: "v1", Fingerprint: "f", Cron: "0 * * * *", Unit: interval.Hour,
		Start: t0, Kind: Incremental, DependsOn: []string{"events"}, Upstream: []string{"events@v1"}, Table: "s@v1"}
	old := snapshotRegisteredBeforeSQL{Snapshot: "s@v1", Model: "s", Version: "v1", Fingerprint: "f", Cron: "0 * * * *", Unit: interval.Hour,
		Start: t0, Kind: Incremental, DependsOn: []string{"events"}, Upstream: []string{"events@v1"}, Table: "s@v1"}
	nb, _ := msgpack.Marshal(p)
	ob, _ := msgpack.Marshal(old)
	if !bytes.Equal(nb, ob) {
		t.Fatalf("msgpack changed:\n%x\n%x", nb, ob)
	}
	nj, _ := json.Marshal(p)
	oj, _ := json.Marshal(old)
	if !bytes.Equal(nj, oj) {
		t.Fatalf("json changed:\n%s\n%s", nj, oj)
	}

	p.SQL, p.TimeColumn = "SELECT * FROM events WHERE ts >= @start_ts AND ts < @end_ts\n", "ts"
	ev := New(NewIDSource(), t0, p)
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
	j, _ := json.Marshal(p)
	if !bytes.Contains(j, []byte(`"sql":"SELECT * FROM events WHERE ts \u003e= @start_ts AND ts \u003c @end_ts\n","time_column":"ts"`)) {
		t.Fatalf("json: %s", j)
	}
}
