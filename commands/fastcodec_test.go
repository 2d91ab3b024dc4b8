package commands

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// completePlain and replyPlain are the reflective codec's view of
// complete_intervals and the reply (the same fields, no methods): the
// oracle the hand-written codecs are checked against.
type (
	completePlain CompleteIntervals
	replyPlain    Reply
	rollbackPlain Rollback
)

// TestHandWrittenEncodersMatchReflective: complete_intervals' and the
// reply's encoders write the reflective encoder's bytes.
func TestHandWrittenEncodersMatchReflective(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := interval.R(t0, t0.Add(time.Hour))
	for i, c := range []CompleteIntervals{
		{},
		{Meta: Meta{ID: "c1"}, Model: "m", Version: "v1", Ranges: []interval.Range{r}},
		{Meta: Meta{ID: "c1", Actor: "worker:1", At: t0.Add(time.Millisecond), Correlation: "p1"}, Model: "m", Version: "v1", Ranges: []interval.Range{}, RunKind: events.RunBackfill, RunID: "r"},
		{Meta: Meta{ID: "c1", At: t0}, Model: "m", Ranges: []interval.Range{r, r}, RunID: "r"},
		{Meta: Meta{ID: "c1"}, Model: "m", Version: "v1", Ranges: []interval.Range{r}, RunKind: events.RunScheduled, Work: "work-7-scheduled"},
		{Meta: Meta{ID: "c1"}, Model: "m", Version: "v1", Ranges: []interval.Range{r}, Work: "work-7-backfill"},
		{Meta: Meta{ID: "c1"}, Model: "m", Version: "v1", Ranges: []interval.Range{r}, Work: "work-7-backfill", Audits: []events.AuditOutcome{
			{Audit: "not_null", Count: 2, Columns: []string{"id"}, Sample: [][]string{{""}, {"x"}}},
			{Audit: "number_of_rows", Passed: true, Count: 12},
			{Audit: "custom", Error: "timed out after 30s"},
		}},
		{Meta: Meta{ID: "c1"}, Model: "m", Version: "v1", Audits: []events.AuditOutcome{}},
	} {
		same(t, "complete_intervals", i, c, completePlain(c))
	}
	for i, c := range []Rollback{
		{},
		{Meta: Meta{ID: "r1"}, Env: "prod"},
		{Meta: Meta{ID: "r1", Actor: "cli", At: t0, Correlation: "c", AfterSeq: 9}, Env: "prod", ToGeneration: 1},
		{Meta: Meta{ID: "r1"}, Env: "prod", ToGeneration: 1 << 40},
	} {
		same(t, "rollback", i, c, rollbackPlain(c))
	}
	for i, rep := range []Reply{
		{},
		{Accepted: true, Seq: 7, Events: 1},
		{Code: CodeInvalid, Field: "ranges[0]", Message: "no"},
		{Accepted: true, Duplicate: true, Seq: 1 << 40, Message: "command already applied"},
		{Accepted: true, Seq: 3, Events: 2, Decision: &events.PromotionDecided{Plan: "p1", Outcome: events.Accepted, Codes: []string{"no_gaps"}},
			Plan: &events.PlanBuilt{Plan: "p1"}, Advances: []events.SchedulerAdvanced{{Env: "prod"}}, Repairs: []Repair{{Env: "prod"}}, Envs: []EnvStatus{{Env: "prod"}},
			Plans: []PlanProgress{{Plan: "p2", Env: "prod", BackfillMS: 7200000, DoneMS: 3600000}}},
		{Accepted: true, CatchUp: &events.CatchUpRequested{Plan: "p1"}, Advances: []events.SchedulerAdvanced{}},
		{Accepted: true, Plans: []PlanProgress{{Plan: "p3", Env: "prod", BackfillMS: 3600000, Models: []ModelProgress{
			{Model: "m", Snapshot: "m@v1", RunKind: events.RunBackfill, Batches: 3, BatchesDone: 1, Intervals: 5, IntervalsDone: 2, Rows: 40,
				DueAt: t0, LastDoneAt: t0.Add(time.Minute), RowsPerSecond: 0.75, IntervalsPerSecond: 1.0 / 30, ETAMS: new(int64)},
			{Model: "n", Snapshot: "n@v1", RunKind: events.RunCatchUp, Batches: 1, Intervals: 1, DueAt: t0}}}}},
		{Accepted: true, Envs: []EnvStatus{{Env: "prod"}}, Retired: []RetiredTable{{Table: "m@v1", Snapshots: []string{"m@v1"}, Seq: 9, JudgedAt: t0, Reason: "unused"}}},
		{Accepted: true, Seq: 12, Events: 1, Rollback: &events.EnvironmentRolledBack{Env: "prod", FromGeneration: 2, ToGeneration: 1, Generation: 3,
			Models:  []events.RolledBackModel{{Model: "m", Restored: "m@v1", Table: "m@v1", Demoted: "m@v2"}},
			Repairs: []events.RolledBackRepair{{Plan: "p2", Model: "m", Snapshot: "m@v2", OpenSeq: 9}}, EvaluatedAtSeq: 11, EvaluatedAt: t0}},
		{Accepted: true, Seq: 12, Events: 3, Restatement: &events.RestatementRequested{Env: "prod", Model: "m", Snapshot: "m@v1", Ranges: []interval.Range{r}, Generation: 2, Run: "restate:c1",
			Work: []events.RestateWork{{Model: "m", Snapshot: "m@v1", Table: "m@v1", Ranges: []interval.Range{r}, Invalidated: []interval.Range{r}}}}},
		{Accepted: true, Envs: []EnvStatus{{Env: "prod"}}, Restatements: []RestateProgress{{Env: "prod", Model: "m", Snapshot: "m@v1", Ranges: []interval.Range{r}, Run: "restate:c1", Seq: 12,
			Models: []ModelProgress{{Model: "m", Snapshot: "m@v1", RunKind: events.RunRestate, Batches: 1, Intervals: 1, DueAt: t0}}}}},
		{Accepted: true, Seq: 9, Events: 2, Registered: []string{"raw@v1", "events@v1"}, Message: "registering 2 snapshot(s)"},
	} {
		same(t, "reply", i, rep, replyPlain(rep))
	}
}

func same(t *testing.T, name string, i int, fast, plain any) {
	t.Helper()
	a, err1 := msgpack.Marshal(fast)
	b, err2 := msgpack.Marshal(plain)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Fatalf("%s %d: hand-written %x (%v), reflective %x (%v)", name, i, a, err1, b, err2)
	}
	// And back: the hand-written decoder reads the bytes as the
	// reflective one does.
	sameDecode(t, a)
}

// sameDecode: the hand-written decoders read a map (or nil) as the
// reflective decoder does (complete_intervals strictly, refusing unknown
// fields), and refuse anything else (the reflective decoder would read an
// array by position).
func sameDecode(t *testing.T, b []byte) {
	t.Helper()
	if len(b) == 0 || (!msgp.IsMap(b[0]) && b[0] != 0xc0) {
		for name, v := range map[string]any{"complete_intervals": &CompleteIntervals{}, "reply": &Reply{}, "rollback": &Rollback{}} {
			if err := decodeWith(b, v, false); err == nil {
				t.Fatalf("%s: hand-written decoder read % x, not a map", name, b)
			}
		}
		return
	}
	compare := func(name string, fast, plain any, strict bool) {
		ferr, perr := decodeWith(b, fast, strict), decodeWith(b, plain, strict)
		if (ferr == nil) != (perr == nil) {
			t.Fatalf("%s: hand-written decoder says %v, reflective %v", name, ferr, perr)
		}
		if ferr == nil && !reflect.DeepEqual(reflect.ValueOf(fast).Elem().Interface(), reflect.ValueOf(plain).Elem().Convert(reflect.TypeOf(fast).Elem()).Interface()) {
			t.Fatalf("%s: hand-written decoder gave %+v, reflective %+v", name, fast, plain)
		}
	}
	compare("complete_intervals", &CompleteIntervals{}, &completePlain{}, true)
	compare("reply", &Reply{}, &replyPlain{}, false)
	compare("rollback", &Rollback{}, &rollbackPlain{}, true)
}

func decodeWith(b []byte, v any, strict bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("panic")
		}
	}()
	if err := msgp.Check(b); err != nil {
		return err // the reflective decoder would allocate what the lengths claim
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(strict)
	return dec.Decode(v)
}

// TestNotAMapIsMalformed: complete_intervals or a reply written as an
// array (which the reflective decoder would read by position), or as any
// other non-map value, is a malformed *Error naming what was wrong.
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
	cmd := asArray(completePlain{Meta: Meta{ID: "c1"}, Model: "m", Version: "v1"})
	reply := asArray(replyPlain{Accepted: true, Seq: 7, Events: 1})
	for _, c := range []struct {
		name string
		b    []byte
		into any
		want string
	}{
		{"complete_intervals as an array", cmd, &CompleteIntervals{}, "malformed: complete_intervals: msgp: not a map: got an array"},
		{"complete_work as an array", cmd, &CompleteWork{}, "malformed: complete_intervals: msgp: not a map: got an array"},
		{"reply as an array", reply, &Reply{}, "malformed: reply: msgp: not a map: got an array"},
		{"reply as a string", []byte("\xa2ok"), &Reply{}, "malformed: reply: msgp: not a map: got a string"},
		{"rollback as an array", asArray(rollbackPlain{Meta: Meta{ID: "r1"}, Env: "prod"}), &Rollback{}, "malformed: rollback: msgp: not a map: got an array"},
	} {
		err := msgp.Unmarshal(c.b, c.into)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != CodeMalformed || err.Error() != c.want+fmt.Sprintf(" (code %#x)", c.b[0]) {
			t.Fatalf("%s: got %v, want %s", c.name, err, c.want)
		}
	}
	// The reflective oracle does read them: the refusal is the
	// hand-written codecs' own.
	var p replyPlain
	if err := msgp.Unmarshal(reply, &p); err != nil || p.Seq != 7 {
		t.Fatalf("oracle: %+v %v", p, err)
	}
	// Through DecodeReply, and through Decode (key by key), too.
	if _, err := DecodeReply(reply, false); !errors.As(err, new(*Error)) {
		t.Fatalf("DecodeReply: %v", err)
	}
	if _, err := Decode(KindCompleteIntervals, ContentMsgpack, cmd); err == nil || !errors.As(err, new(*Error)) {
		t.Fatalf("Decode: %v", err)
	}
}
