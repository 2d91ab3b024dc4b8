package msgp

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/vmihailenco/msgpack/v5"
)

// TestRangeCodec: interval.Range, registered by this package, is written
// as [start_unix_seconds, end_unix_seconds] wherever it appears (not as
// its text form) and read back in UTC; nil reads as the zero range.
func TestRangeCodec(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := interval.R(t0, t0.Add(time.Hour))
	type holder struct {
		R   interval.Range   `msgpack:"r"`
		P   *interval.Range  `msgpack:"p"`
		L   []interval.Range `msgpack:"l"`
		Set interval.Set     `msgpack:"s"`
	}
	cases := []struct {
		name string
		v    any
		hex  string
	}{
		{"range", r, "92ce6b0e0e00ce6b0e1c10"},
		{"pointer", &r, "92ce6b0e0e00ce6b0e1c10"},
		{"small and negative", interval.Range{Start: time.Unix(-1, 0), End: time.Unix(300, 0)}, "92ffcd012c"},
		{"in a struct", holder{R: r, P: &r, L: []interval.Range{r}, Set: interval.Set{r}},
			"84a17292ce6b0e0e00ce6b0e1c10a17092ce6b0e0e00ce6b0e1c10a16c9192ce6b0e0e00ce6b0e1c10a1739192ce6b0e0e00ce6b0e1c10"},
		{"zero range, nil pointer and lists", holder{}, "84a17292d3fffffff1886e0900d3fffffff1886e0900a170c0a16cc0a173c0"},
	}
	for _, c := range cases {
		b, err := msgpack.Marshal(c.v)
		if err != nil || hex.EncodeToString(b) != c.hex {
			t.Fatalf("%s: wrote %x (%v), want %s", c.name, b, err, c.hex)
		}
		var enc bytes.Buffer
		switch v := c.v.(type) {
		case interval.Range:
			err = EncodeRange(msgpack.NewEncoder(&enc), v)
			if err != nil || !bytes.Equal(enc.Bytes(), b) {
				t.Fatalf("%s: EncodeRange wrote %x (%v)", c.name, enc.Bytes(), err)
			}
		}
	}
	var h holder
	b, _ := hex.DecodeString(cases[3].hex)
	if err := Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	if h.R != r || h.P == nil || *h.P != r || len(h.L) != 1 || h.L[0] != r || len(h.Set) != 1 || h.Set[0] != r {
		t.Fatalf("decoded %+v", h)
	}
	if h.R.Start.Location() != time.UTC {
		t.Fatalf("decoded %v, not in UTC", h.R.Start.Location())
	}
	// nil is the zero range (and a nil pointer); other lengths are refused.
	h = holder{R: r, P: &r}
	if err := Unmarshal([]byte("\x82\xa1r\xc0\xa1p\xc0"), &h); err != nil || h.R != (interval.Range{}) || h.P != nil {
		t.Fatalf("nil: %+v %v", h, err)
	}
	for _, bad := range []string{"\x93\x01\x02\x03", "\x91\x01", "\xa3abc"} {
		var got interval.Range
		if err := Unmarshal([]byte(bad), &got); err == nil {
			t.Fatalf("% x decoded to %v", bad, got)
		}
		if _, err := DecodeRange(msgpack.NewDecoder(bytes.NewReader([]byte(bad)))); err == nil {
			t.Fatalf("DecodeRange read % x", bad)
		}
	}
}
