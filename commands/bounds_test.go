package commands

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The bounds a plan is built with keep their wire keys at the top level
// of build_plan (inline), in both encodings, and decode from there.
func TestBoundsInline(t *testing.T) {
	want := &BuildPlan{Meta: Meta{ID: "b1"}, Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v2"},
		Bounds: Bounds{MaxTrailingGapAdvances: 1, MaxCatchUpAdvances: 2}}
	for _, asJSON := range []bool{true, false} {
		body, err := Encode(want, asJSON)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]any
		if asJSON {
			if !bytes.Contains(body, []byte(`"max_trailing_gap_advances":1`)) || !bytes.Contains(body, []byte(`"max_catch_up_advances":2`)) {
				t.Fatalf("JSON %s: the bounds are not top-level keys", body)
			}
		} else if err := msgpack.Unmarshal(body, &top); err != nil || top["max_trailing_gap_advances"] == nil || top["max_catch_up_advances"] == nil {
			t.Fatalf("msgpack %v (%v): the bounds are not top-level keys", top, err)
		}
		ct := ContentMsgpack
		if asJSON {
			ct = ContentJSON
		}
		got, err := Decode(KindBuildPlan, ct, body)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.(*BuildPlan).Bounds; b != want.Bounds {
			t.Fatalf("json %v: decoded bounds %+v, want %+v", asJSON, b, want.Bounds)
		}
	}
	var ce *Error
	if err := (Bounds{MaxCatchUpAdvances: -1}).Validate(); !errors.As(err, &ce) || ce.Code != CodeInvalid || ce.Field != "max_catch_up_advances" {
		t.Fatalf("a negative catch-up bound: %v", err)
	}
}
