package events

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// wirePlain and completedPlain are the reflective codec's view of the
// envelope and IntervalsCompleted (the same fields, no methods): the
// oracle the hand-written codecs are checked against.
type (
	wirePlain      wire
	completedPlain IntervalsCompleted
	// rolledBackPlain shares its elements' hand-written codecs, which
	// modelPlain and repairPlain check on their own.
	rolledBackPlain EnvironmentRolledBack
	modelPlain      RolledBackModel
	repairPlain     RolledBackRepair
)

// TestNotAMapIsMalformed: an envelope or a payload written as an array
// (which the reflective decoder would read by position) or as any other
// non-map value is a Malformed *DecodeError naming what was wrong.
func TestNotAMapIsMalformed(t *testing.T) {
	asArray := func(v any) []byte {
		var b bytes.Buffer
		enc := msgpack.NewEncoder(&b)
		enc.UseArrayEncodedStructs(true)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	event := func(typ Type, data []byte) []byte {
		b, err := msgpack.Marshal(&wirePlain{Envelope: Envelope{ID: "01KBC5Y3ZP8V3M1Q2R4S5T6V7W", Type: typ, Schema: SchemaVersion, OccurredAt: t0}, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	completed := asArray(completedPlain{Snapshot: "a@v1", Table: "a@v1", RunKind: RunScheduled})
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"envelope as an array":         {asArray(wirePlain{Envelope: Envelope{ID: "x", Type: TypeIntervalsCompleted, Schema: SchemaVersion, OccurredAt: t0}, Data: completed}), "envelope: msgp: not a map: got an array"},
		"envelope as a string":         {[]byte("\xa3abc"), "envelope: msgp: not a map: got a string"},
		"envelope as an integer":       {[]byte{0x07}, "envelope: msgp: not a map: got an integer"},
		"data as an array":             {event(TypeIntervalsCompleted, completed), "IntervalsCompleted data: msgp: not a map: got an array"},
		"other data as an array":       {event(TypePlanBuilt, asArray(PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: t0})), "PlanBuilt data: msgp: not a map: got an array"},
		"data as a string (fuzz seed)": {[]byte("\x83\xa4type\xb2IntervalsCompleted\xa6schema\x01\xa4data\xa3abc"), "IntervalsCompleted data: msgp: not a map: got a string"},
		"rollback data as an array":    {event(TypeEnvironmentRolledBack, asArray(rolledBackPlain{Env: "prod", Models: []RolledBackModel{}})), "EnvironmentRolledBack data: msgp: not a map: got an array"},
		"rollback model as an array": {event(TypeEnvironmentRolledBack, rollbackWith(t, "models", asArray(modelPlain{Model: "m"}))),
			"RolledBackModel: msgp: not a map: got an array"},
		"rollback repair as an array": {event(TypeEnvironmentRolledBack, rollbackWith(t, "repairs", asArray(repairPlain{Plan: "p"}))),
			"RolledBackRepair: msgp: not a map: got an array"},
	} {
		_, err := Decode(c.b)
		var de *DecodeError
		if !errors.As(err, &de) || de.Kind != Malformed || !errors.Is(err, ErrDecode) || !errors.Is(err, msgp.ErrNotMap) {
			t.Fatalf("%s: got %v, want a Malformed *DecodeError", name, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %q does not say %q", name, err, c.want)
		}
	}
	// IntervalsCompleted's own codec refuses it too, where the reflective
	// oracle reads it: the refusal is the hand-written codec's.
	var p IntervalsCompleted
	if err := msgp.Unmarshal(completed, &p); !errors.Is(err, msgp.ErrNotMap) || !strings.Contains(err.Error(), "IntervalsCompleted data: msgp: not a map: got an array") {
		t.Fatalf("hand-written codec: %v", err)
	}
	var plain completedPlain
	if err := msgp.Unmarshal(completed, &plain); err != nil || plain.Snapshot != "a@v1" {
		t.Fatalf("oracle: %+v %v", plain, err)
	}
}

// recordedPlain is the reflective codec's view of AuditRecorded (its
// AuditOutcome has no methods, so the inline fields are the reflective
// encoder's).
type recordedPlain struct {
	Snapshot     string           `msgpack:"snapshot"`
	Table        string           `msgpack:"table"`
	Ranges       []interval.Range `msgpack:"ranges"`
	Blocking     bool             `msgpack:"blocking"`
	Work         string           `msgpack:"work,omitempty"`
	AuditOutcome `msgpack:",inline"`
}

// TestAuditCodecsMatchReflective: AuditRecorded's and the outcomes'
// hand-written codecs write the reflective encoder's bytes and read them
// back, every optional field set or not.
func TestAuditCodecsMatchReflective(t *testing.T) {
	r := interval.R(t0, t0.Add(time.Hour))
	outcomes := []AuditOutcome{
		{},
		{Audit: "not_null", Count: 3, Columns: []string{"id", "ts"}, Sample: [][]string{{"1", ""}, {"x", "y"}, nil}},
		{Audit: "rows", Passed: true, Count: 1 << 40},
		{Audit: "custom", Count: -1, Error: "timed out", Columns: []string{}, Sample: [][]string{}},
	}
	for i, o := range outcomes {
		p := AuditRecorded{Snapshot: "a@v1", Table: "a@v1", Ranges: []interval.Range{r}, Blocking: i%2 == 0, AuditOutcome: o}
		if i == 1 {
			p.Work = "work-3-backfill"
		}
		fast, err1 := msgpack.Marshal(p)
		plain, err2 := msgpack.Marshal(recordedPlain(p))
		if err1 != nil || err2 != nil || !bytes.Equal(fast, plain) {
			t.Fatalf("AuditRecorded %d: hand-written %x (%v), reflective %x (%v)", i, fast, err1, plain, err2)
		}
		var back AuditRecorded
		if err := msgp.Unmarshal(plain, &back); err != nil {
			t.Fatalf("AuditRecorded %d: %v", i, err)
		}
		var oracle recordedPlain
		if err := msgpack.Unmarshal(plain, &oracle); err != nil {
			t.Fatal(err)
		}
		want := AuditRecorded(oracle)
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("AuditRecorded %d: hand-written decode %#v, reflective %#v", i, back, want)
		}
	}
	type listPlain struct {
		Audits []AuditOutcome `msgpack:"audits"`
	}
	for _, l := range [][]AuditOutcome{nil, {}, outcomes} {
		var b bytes.Buffer
		enc := msgpack.NewEncoder(&b)
		if err := enc.EncodeMapLen(1); err != nil {
			t.Fatal(err)
		}
		if err := EncodeAuditOutcomes(enc, "audits", l); err != nil {
			t.Fatal(err)
		}
		plain, err := msgpack.Marshal(listPlain{l})
		if err != nil || !bytes.Equal(b.Bytes(), plain) {
			t.Fatalf("outcomes %d: hand-written %x, reflective %x (%v)", len(l), b.Bytes(), plain, err)
		}
		var oracle listPlain
		if err := msgpack.Unmarshal(plain, &oracle); err != nil {
			t.Fatal(err)
		}
		dec := msgpack.NewDecoder(bytes.NewReader(plain[1+len("\xa6audits"):]))
		back, err := DecodeAuditOutcomes(dec)
		if err != nil || !reflect.DeepEqual(back, oracle.Audits) {
			t.Fatalf("outcomes %d: decoded %#v (%v), reflective %#v", len(l), back, err, oracle.Audits)
		}
	}
	// An unknown key of an outcome is refused (a command's strict decode).
	bad, _ := msgpack.Marshal([]map[string]any{{"audit": "a", "colour": "red"}})
	if _, err := DecodeAuditOutcomes(msgpack.NewDecoder(bytes.NewReader(bad))); err == nil || !strings.Contains(err.Error(), `unknown field "colour" in audits[0]`) {
		t.Fatalf("unknown key: %v", err)
	}
}

// rollbackWith is an EnvironmentRolledBack's data whose key (models or
// repairs) holds one element written as elem.
func rollbackWith(t *testing.T, key string, elem []byte) []byte {
	t.Helper()
	b, err := msgpack.Marshal(map[string]any{"env": "prod", key: []msgpack.RawMessage{elem}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
