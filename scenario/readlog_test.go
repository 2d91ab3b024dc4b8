package scenario

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
)

// readLog reads js's whole event stream (eventlog.Reader.Read).
func readLog(ctx context.Context, js jetstream.JetStream) ([]events.Record, error) {
	r, err := eventlog.OpenReader(ctx, js)
	if err != nil {
		return nil, err
	}
	return r.Read(ctx, eventlog.ReadOptions{})
}
