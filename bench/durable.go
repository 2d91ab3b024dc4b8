package bench

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tidemark/tidemark/events"
)

// The disk limit: under SyncAlways every stored message costs one fsync,
// so the most events a single-replica file store takes per second is set
// by how many events one message carries. diskLimit measures it with
// sync publishes from benchClients publishers: per event messages/s × per.

// diskLimit publishes total events, per to a message, from benchClients
// publishers each awaiting its ack, on e's stream, and returns events/s.
func diskLimit(ctx context.Context, e *instance, total, per int) (float64, error) {
	msgs := total / per
	if msgs < benchClients {
		msgs = benchClients
	}
	rate, err := parallel(benchClients, msgs, func(_, i int) error {
		subj, body := diskMsg(i, per)
		_, err := e.JetStream().Publish(ctx, subj, body)
		return err
	})
	return rate * float64(per), err
}

// diskMsg is the i-th message of the disk limit carrying per events: one
// event on its own subject, or per events concatenated.
func diskMsg(i, per int) (string, []byte) {
	if per == 1 {
		return eventBytes(i, benchSnapshots)
	}
	var buf bytes.Buffer
	for k := 0; k < per; k++ {
		_, b := eventBytes(i*per+k, benchSnapshots)
		buf.Write(b)
	}
	return events.SubjectPrefix + "disklimit", buf.Bytes()
}

var _ = fmt.Sprint
