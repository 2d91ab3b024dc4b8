package eventlog

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// stateDamage reads lost events off the stream's state: sequences before
// the first, deleted ones (the stream denies deletes), ones the server
// lost while recovering (even past a last sequence that shrank), and the
// tail a checkpoint says the stream once held.
func TestStateDamage(t *testing.T) {
	cases := []struct {
		name          string
		st            jetstream.StreamState
		upTo, minLast uint64
		want          string // "" when nothing is missing
	}{
		{"healthy", jetstream.StreamState{Msgs: 28, FirstSeq: 1, LastSeq: 28}, 0, 28, ""},
		{"empty", jetstream.StreamState{}, 0, 0, ""},
		{"deleted tail", jetstream.StreamState{Msgs: 13, FirstSeq: 1, LastSeq: 28, Deleted: []uint64{14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}, NumDeleted: 15}, 0, 0,
			"15 of its 28 events are missing (seq 14-28)"},
		{"deleted, read up to 15", jetstream.StreamState{Msgs: 13, FirstSeq: 1, LastSeq: 28, Deleted: []uint64{14, 15, 16, 27, 28}, NumDeleted: 5}, 15, 0,
			"2 of its 28 events are missing (seq 14-15)"},
		{"all gone", jetstream.StreamState{FirstSeq: 29, LastSeq: 28}, 0, 0, "28 of its 28 events are missing (seq 1-28)"},
		{"head gone", jetstream.StreamState{Msgs: 20, FirstSeq: 9, LastSeq: 28}, 0, 0, "8 of its 28 events are missing (seq 1-8)"},
		{"lost past the last", jetstream.StreamState{Msgs: 13, FirstSeq: 1, LastSeq: 13, Lost: &jetstream.LostStreamData{Msgs: []uint64{14, 15, 16}}}, 0, 0,
			"3 of its 16 events are missing (seq 14-16)"},
		{"checkpoint past the last", jetstream.StreamState{Msgs: 13, FirstSeq: 1, LastSeq: 13}, 0, 28, "15 of its 28 events are missing (seq 14-28)"},
		{"scattered", jetstream.StreamState{Msgs: 6, FirstSeq: 2, LastSeq: 10, Deleted: []uint64{4, 5, 9}, NumDeleted: 3}, 0, 0,
			"4 of its 10 events are missing (seq 1, 4-5, 9)"},
	}
	for _, c := range cases {
		d := stateDamage(c.st, c.upTo, c.minLast)
		got := ""
		if !d.empty() {
			got = d.Error()
		}
		if c.want == "" && got != "" || c.want != "" && !strings.HasSuffix(got, c.want) {
			t.Errorf("%s: got %q, want …%q", c.name, got, c.want)
		}
	}
}
