package checkpoint

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// A checkpoint decodes to the state it encoded; any change to its header
// or its state, and another format, is refused (the caller rebuilds).
func TestEncodeDecode(t *testing.T) {
	st := projections.New()
	ids := events.NewIDSource()
	var last string
	for i, env := range []string{"prod", "qa"} {
		ev := events.New(ids, time.Date(2026, 12, 1, i, 0, 0, 0, time.UTC), events.EnvironmentFinalized{Env: env, Plan: "p1", Generation: 1})
		if err := projections.Apply(st, uint64(i+1), ev); err != nil {
			t.Fatal(err)
		}
		last = ev.ID
	}
	b, err := Encode(st, last)
	if err != nil {
		t.Fatal(err)
	}
	h, got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Seq != 2 || h.LastEventID != last || h.Format != Format || checkpointSeq(b) != 2 {
		t.Fatalf("header %+v", h)
	}
	want, _ := json.Marshal(st)
	have, _ := json.Marshal(got)
	if !bytes.Equal(want, have) {
		t.Fatalf("state changed:\n%s\n%s", want, have)
	}

	i := bytes.IndexByte(b, '\n')
	tamper := func(name string, f func(b []byte) []byte) {
		t.Helper()
		if _, _, err := Decode(f(bytes.Clone(b))); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	tamper("state byte", func(b []byte) []byte { b[len(b)-5] ^= 1; return b })
	tamper("header seq", func(b []byte) []byte { return bytes.Replace(b, []byte(`"seq":2`), []byte(`"seq":3`), 1) })
	tamper("no header", func(b []byte) []byte { return b[i+1:] })
	tamper("format", func(b []byte) []byte {
		var h Header
		if err := json.Unmarshal(b[:i], &h); err != nil {
			t.Fatal(err)
		}
		h.Format++
		h.Fingerprint = h.fingerprint()
		head, _ := json.Marshal(h)
		return append(append(head, '\n'), b[i+1:]...)
	})
}
