package commands

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// FuzzDecode: any body of any kind, msgpack or JSON, decodes to a valid
// command or a typed *Error naming what is wrong — never a panic, and
// never an invalid command handed on (Decode validates).
func FuzzDecode(f *testing.F) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	samples := []Command{
		&RegisterSnapshot{Meta: Meta{ID: "a"}, Model: "events", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"raw"}},
		&BuildPlan{Meta: Meta{ID: "b"}, Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v2"}, Bounds: Bounds{MaxTrailingGapAdvances: 1}},
		&CompleteIntervals{Meta: Meta{ID: "c", At: t0.Add(3 * time.Hour)}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, RunKind: "scheduled"},
		&AdvanceScheduler{Meta: Meta{ID: "d"}, Env: "prod", Generation: 2},
		&Promote{Meta: Meta{ID: "e"}, Plan: "p1"},
		&FailRun{Meta: Meta{ID: "f"}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, RunKind: "backfill", Error: "exit status 1", Attempt: 1},
	}
	for i, c := range samples {
		for _, asJSON := range []bool{false, true} {
			b, err := Encode(c, asJSON)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), asJSON, b)
		}
	}
	for _, c := range []Command{
		&CompleteWork{CompleteIntervals{Meta: Meta{ID: "g"}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, RunKind: "scheduled", Work: "work-12-scheduled"}},
		&CompleteWork{CompleteIntervals{Meta: Meta{ID: "i"}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, Work: "work-3-backfill",
			Audits: []events.AuditOutcome{{Audit: "ids", Count: 1, Columns: []string{"id"}, Sample: [][]string{{""}}}, {Audit: "rows", Passed: true, Error: "x"}}}},
		&FailWork{FailRun{Meta: Meta{ID: "h"}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, RunKind: "backfill", Error: "exit status 1", Attempt: 1, Work: "work-3-backfill"}},
		&Rollback{Meta: Meta{ID: "i"}, Env: "prod", ToGeneration: 2},
		&RegisterSnapshots{Meta: Meta{ID: "j"}, Snapshots: []RegisterSnapshot{{Model: "raw", Version: "v1", Cron: "@hourly", Start: t0},
			{Model: "events", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"raw"}}}},
	} {
		for _, asJSON := range []bool{false, true} {
			b, err := Encode(c, asJSON)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(slices.Index(Kinds, c.Kind())), asJSON, b)
		}
	}
	f.Add(uint8(0), true, []byte(`{"id":"x","lookback":1e400}`))
	f.Add(uint8(4), true, []byte(`{"id":"x","plan":"p1","plan":"p2"}`))
	f.Add(uint8(1), true, []byte(`{"id":"x","plan":"p","env":"e","versions":{"m":"v1","m":"v2"}}`))
	f.Add(uint8(4), false, []byte{0x83, 0xa2, 'i', 'd', 0xa1, 'x', 0xa4, 'p', 'l', 'a', 'n', 0xa1, 'p', 0xa4, 'p', 'l', 'a', 'n', 0xa1, 'q'})
	f.Add(uint8(2), false, []byte{0x81, 0xa6, 0x72, 0x61, 0x6e, 0x67, 0x65, 0x73, 0x91, 0x92, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x01})
	f.Fuzz(func(t *testing.T, kindIdx uint8, asJSON bool, body []byte) {
		kind := Kinds[int(kindIdx)%len(Kinds)]
		ct := ContentMsgpack
		if asJSON {
			ct = ContentJSON
		}
		if !asJSON {
			sameDecode(t, body)
		}
		if !asJSON && len(body) > 0 {
			fast, slow := mustNew(t, kind), mustNew(t, kind)
			ferr, serr := decodeMsgpack(body, fast), decodeMsgpackKeys(body, slow)
			if (ferr == nil) != (serr == nil) || (ferr != nil && ferr.Error() != serr.Error()) {
				t.Fatalf("one-pass decode says %v, key by key %v", ferr, serr)
			}
			if ferr == nil && !reflect.DeepEqual(fast, slow) {
				t.Fatalf("one-pass decode gave %#v, key by key %#v", fast, slow)
			}
		}
		cmd, err := Decode(kind, ct, body)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Code == "" {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if cmd.Kind() != kind {
			t.Fatalf("decoded %s as %s", kind, cmd.Kind())
		}
		if err := cmd.Validate(); err != nil {
			t.Fatalf("Decode returned an invalid command: %v", err)
		}
	})
}

func mustNew(t *testing.T, kind string) Command {
	c, err := New(kind)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
