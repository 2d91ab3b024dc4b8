package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
)

// Batches whose deliveries ran out. The work consumer delivers a message
// at most MaxDeliver times. A worker reports its last failed attempt
// final, but a batch can run out of deliveries with nothing reported: the
// worker killed on each delivery (a batch that exhausts its memory), or
// stopped, or unable to reach the engine at its last attempt. JetStream
// then delivers it no more and says so in an advisory; the publisher
// records such a batch failed for good (fail_work, final, as the engine),
// so it shows as failed and the batches waiting for it are given up
// instead of holding the work cursor, and removes the message.

// maxDeliveriesSubject is the advisory JetStream sends when a message of
// the work consumer reaches its MaxDeliver.
var maxDeliveriesSubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + Stream + "." + Consumer

// maxDeliveries is the part of that advisory the publisher reads.
type maxDeliveries struct {
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchExhausted subscribes to the max-deliveries advisory of the work
// consumer; each message it names is handed to exhausted. The returned
// function unsubscribes.
func (p *Publisher) watchExhausted(ctx context.Context, log *slog.Logger) (func(), error) {
	ch := make(chan *nats.Msg, 64)
	sub, err := p.Log.JetStream().Conn().ChanSubscribe(maxDeliveriesSubject, ch)
	if err != nil {
		return nil, fmt.Errorf("work: max deliveries advisory: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-ch:
				var a maxDeliveries
				if err := json.Unmarshal(m.Data, &a); err != nil || a.StreamSeq == 0 {
					log.Warn("max deliveries advisory unreadable", "err", err)
					continue
				}
				if err := p.exhausted(ctx, a); err != nil && ctx.Err() == nil {
					log.Error("a work message ran out of deliveries and could not be recorded failed", "stream_seq", a.StreamSeq, "err", err)
				}
			}
		}
	}()
	return func() { _ = sub.Unsubscribe(); cancel(); <-done }, nil
}

// exhausted records each range of the message a failed for good and
// deletes it from the work stream.
func (p *Publisher) exhausted(ctx context.Context, a maxDeliveries) error {
	js := p.Log.JetStream()
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		return err
	}
	raw, err := s.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		return err // acked or deleted meanwhile: nothing to record
	}
	var item Item
	if err := json.Unmarshal(raw.Data, &item); err != nil {
		return fmt.Errorf("undecodable work message: %w", err)
	}
	p.logger().Warn("work ran out of deliveries without a final report; recorded failed for good", "subsystem", "work", "item", item.Key(), "deliveries", a.Deliveries)
	if p.Reporter != nil && item.ID != "" {
		for si, st := range item.Steps {
			for ri, r := range st.Ranges {
				cmd := &commands.FailWork{FailRun: commands.FailRun{
					Meta:  commands.Meta{ID: commands.InternalID("work", fmt.Sprintf("%s/%d/%d/exhausted", item.Key(), si, ri)), Actor: "engine", At: p.now(), Correlation: st.RunID},
					Model: st.Model, Version: st.Version, Ranges: []interval.Range{r}, RunKind: item.RunKind, RunID: st.RunID,
					ExitStatus: -1, Error: fmt.Sprintf("delivered %d times without a report (a worker killed or stopped on each, or unable to reach the engine): given up", a.Deliveries),
					Attempt: int(a.Deliveries), Final: true, Work: item.ID}}
				if err := p.retry(ctx, "recording exhausted work", func() error {
					err := p.Reporter.Handle(ctx, cmd).Err()
					if err != nil && !Transient(err) {
						p.logger().Warn("the engine refused the record of exhausted work", "item", item.Key(), "err", err)
						return nil
					}
					return err
				}); err != nil {
					return err
				}
			}
		}
	}
	if err := s.DeleteMsg(ctx, a.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	return nil
}
