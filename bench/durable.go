package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
)

// The durable rows. Under SyncAlways every stored message costs one fsync,
// so the events a single-replica file store takes per second are set by
// how many events one message carries: the disk limit row measures that
// (16 publishers each awaiting its ack, 16 events to a message vs one).
// tidemark's durable row is its command path under SyncAlways with
// coalesced group commit (engine.Config.Coalesce: a group of concurrent
// completions stored as one message) against raw sync publishes of one
// event each, from as many publishers as tidemark has clients.

// diskLimit publishes total events, per to a message, from benchClients
// publishers each awaiting its ack, on e's stream, and returns events/s.
func diskLimit(ctx context.Context, e *instance, total, per int) (float64, error) {
	msgs := max(total/per, benchClients)
	rate, err := parallel(benchClients, msgs, func(_, i int) error {
		subj, body := diskMsg(i, per)
		_, err := e.Log().JetStream().Publish(ctx, subj, body)
		return err
	})
	return rate * float64(per), err
}

// diskMsg is the i-th message of the disk limit carrying per events: one
// event on its own subject, or per events' encodings concatenated.
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

// coalescing is an engine under SyncAlways that coalesces its groups, with
// 1,000 snapshots and 16 command clients.
func coalescing(ctx context.Context) (*instance, func(), error) {
	dir, err := os.MkdirTemp("", "tidemark-bench-*")
	if err != nil {
		return nil, nil, err
	}
	e, err := open(ctx, dir, true, engine.Config{Logger: quiet(), CheckpointEvery: -1, TrustCommandTime: true, Coalesce: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	done := func() { e.Close(context.Background()); os.RemoveAll(dir) }
	if err := snapshots(ctx, e, benchSnapshots); err != nil {
		done()
		return nil, nil, err
	}
	return e, done, nil
}

// durableRounds is how many turns the durable row's two sides take: the
// disk's speed drifts with whatever else the machine writes, so each side
// runs a share of its total in turn, and each rate is its total over the
// time all its shares took.
const durableRounds = 4

// durablePair measures tidemark's durable throughput (commands/s; 16
// clients, coalesced group commit) and raw sync publishes of one event
// each (events/s; 16 publishers) in alternating rounds, and the mean
// number of commands per message tidemark stored.
func durablePair(ctx context.Context, total int) (tm, raw, group float64, err error) {
	e, done, err := coalescing(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	defer done()
	cs, stop, err := serveClients(e, benchClients)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	r, doneRaw, err := server(ctx, true)
	if err != nil {
		return 0, 0, 0, err
	}
	defer doneRaw()
	before, err := e.Log().Reader().LastSeq(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	share := max(total/durableRounds, benchClients)
	var tmTime, rawTime time.Duration
	for round := 0; round < durableRounds; round++ {
		rate, err := throughput(ctx, cs, share, benchSnapshots, fmt.Sprintf("dur%d", round))
		if err != nil {
			return 0, 0, 0, err
		}
		tmTime += time.Duration(float64(share) / rate * float64(time.Second))
		if rate, err = diskLimit(ctx, r, share, 1); err != nil {
			return 0, 0, 0, err
		}
		rawTime += time.Duration(float64(share) / rate * float64(time.Second))
	}
	after, err := e.Log().Reader().LastSeq(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	n := float64(share * durableRounds)
	return n / tmTime.Seconds(), n / rawTime.Seconds(), n / float64(max(after-before, 1)), nil
}

// durableFigure is the disk limit row and the durable throughput row.
func durableFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	tm, rawTP, group, err := durablePair(ctx, sz.durable)
	if err != nil {
		return nil, err
	}
	raw, doneRaw, err := server(ctx, true)
	if err != nil {
		return nil, err
	}
	defer doneRaw()
	one, err := diskLimit(ctx, raw, sz.durable/2, 1)
	if err != nil {
		return nil, err
	}
	per16, err := diskLimit(ctx, raw, sz.durable*2, 16)
	if err != nil {
		return nil, err
	}
	per64, err := diskLimit(ctx, raw, sz.durable*4, 64)
	if err != nil {
		return nil, err
	}
	cost, err := atomicBatchCost(ctx, raw, benchClients, 30)
	if err != nil {
		return nil, err
	}
	return []Figure{
		{Name: "disk limit (SyncAlways, 16 publishers: 16 events to a message vs 1)", Tidemark: per16, Raw: one, Unit: "events/s", Ratio: per16 / one,
			Goal: "the durable row's limit", Pass: true,
			Note: fmt.Sprintf("64 events to a message: %.0f events/s (%.1f× one each); an atomic batch of 16 costs %.1f ms (at most %.0f events/s)",
				per64, per64/one, float64(cost)/float64(time.Millisecond), benchClients/cost.Seconds())},
		{Name: "durable throughput (SyncAlways, 16 clients)", Tidemark: tm, Raw: rawTP, Unit: "ops/s", Ratio: tm / rawTP,
			Goal: ">= 3.0 (group commit)", Pass: tm/rawTP >= 3,
			Note: fmt.Sprintf("coalesced group commit: %.1f commands per stored message (one fsync each); sides measured in %d alternating rounds", group, durableRounds)},
	}, nil
}
