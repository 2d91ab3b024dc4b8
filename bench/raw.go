package bench

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"github.com/tidemark/tidemark/events"
	"github.com/vmihailenco/msgpack/v5"
)

// The raw baselines: what JetStream does without tidemark, published and
// read directly (the only code outside package eventlog that publishes to
// or consumes the event stream).

func rawAsync(ctx context.Context, js jetstream.JetStream, total, snaps int) (float64, error) {
	start := time.Now()
	for i := 0; i < total; {
		subj, b := eventBytes(i, snaps)
		if _, err := js.PublishAsync(subj, b); err != nil {
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return 0, err
			}
			// The server is behind (a loaded machine): let it catch up.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			continue
		}
		i++
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// atomicBatchCost is the mean time of an atomic batch of n events on e's
// stream (what one fsync for a group of n commands would cost).
func atomicBatchCost(ctx context.Context, e *instance, n, batches int) (time.Duration, error) {
	start := time.Now()
	for b := 0; b < batches; b++ {
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			subj, data := eventBytes(b*n+i, 1<<30)
			msgs[i] = &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		}
		if _, err := jetstreamext.PublishMsgBatch(ctx, e.Log().JetStream(), msgs); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(batches), nil
}

// rawRead reads n events from the start of js's event stream with a raw
// ordered consumer, decoding each.
func rawRead(ctx context.Context, js jetstream.JetStream, n int) error {
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	for read := 0; read < n; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			if _, err := events.Decode(m.Data()); err != nil {
				return err
			}
			read++
		}
	}
	return nil
}

// limitReaders starts on each of conns an ordered consumer of the event
// stream, from its next message, that decodes every event the limit
// service appends, as each member of a tidemark cluster folds every event
// into its live projection; stop ends them.
func limitReaders(ctx context.Context, conns []*nats.Conn) (stop func(), err error) {
	var ccs []jetstream.ConsumeContext
	stop = func() {
		for _, cc := range ccs {
			cc.Stop()
		}
	}
	for _, nc := range conns {
		js, err := jetstream.New(nc)
		if err != nil {
			stop()
			return nil, err
		}
		cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			stop()
			return nil, err
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			var ev limitEvent
			_ = msgpack.Unmarshal(m.Data(), &ev)
		})
		if err != nil {
			stop()
			return nil, err
		}
		ccs = append(ccs, cc)
	}
	return stop, nil
}
