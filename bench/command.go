package bench

import (
	"context"
	"fmt"
	"time"
)

// The command rows: tidemark's command path against the transport limit
// (limit.go), both with 16 clients each awaiting its reply (throughput)
// or one client (latency), at 1,000 snapshots and at ten times as many.

// commandRun is one size's measurements.
type commandRun struct {
	sides
	// lat and limLat are the one-client latencies.
	lat, limLat []time.Duration
}

// measureCommands runs both sides over snaps snapshots: n commands each
// for throughput (in alternating rounds), then lat sequential commands
// from one client each.
func measureCommands(ctx context.Context, snaps, n, lat int) (commandRun, error) {
	var out commandRun
	_, cs, done, err := servedWith(ctx, false, snaps)
	if err != nil {
		return out, err
	}
	defer done()
	lim, err := startLimit(ctx)
	if err != nil {
		return out, err
	}
	defer lim.close()
	if out.sides, err = sideBySide(ctx, cs, lim, n, 4, snaps, "tp"); err != nil {
		return out, err
	}
	out.lat = make([]time.Duration, lat)
	for i := range out.lat {
		s := time.Now()
		r, err := cs[0].Do(ctx, completion(n+i, snaps, fmt.Sprintf("lat-%d", i)))
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			return out, err
		}
		out.lat[i] = time.Since(s)
	}
	one := &limitSide{conns: lim.conns[:1]}
	out.limLat = make([]time.Duration, lat)
	for i := range out.limLat {
		s := time.Now()
		if _, err := one.run(n+i, 1, snaps); err != nil {
			return out, err
		}
		out.limLat[i] = time.Since(s)
	}
	return out, nil
}

func commandFigures(ctx context.Context, sz sizes) ([]Figure, error) {
	const snaps = benchSnapshots
	run, err := measureCommands(ctx, snaps, sz.commands, sz.latency)
	if err != nil {
		return nil, err
	}
	// The raw figures, for reference: async publishes of the same events,
	// and one client's synchronous publish.
	raw, doneRaw, err := server(ctx, false)
	if err != nil {
		return nil, err
	}
	defer doneRaw()
	rawTP, err := rawAsync(ctx, raw.Log().JetStream(), sz.commands, snaps)
	if err != nil {
		return nil, err
	}
	// Let the raw server's own projection finish folding what was just
	// published, so it does not compete with the latency run.
	if err := raw.CatchUp(ctx); err != nil {
		return nil, err
	}
	rawLat := make([]time.Duration, sz.latency)
	for i := range rawLat {
		subj, b := eventBytes(sz.commands+i, snaps)
		s := time.Now()
		if _, err := raw.Log().JetStream().Publish(ctx, subj, b); err != nil {
			return nil, err
		}
		rawLat[i] = time.Since(s)
	}
	p50, p99 := percentile(run.lat, .5), percentile(run.lat, .99)
	l50, l99 := percentile(run.limLat, .5), percentile(run.limLat, .99)
	tp := Figure{Name: "command throughput (16 clients, complete_intervals over 1,000 snapshots)", Tidemark: run.tidemark, Limit: run.limit, Raw: rawTP, Unit: "ops/s",
		Ratio: run.tidemark / run.limit, Goal: ">= 0.8 of the transport limit", Pass: run.tidemark/run.limit >= 0.8,
		Note: fmt.Sprintf("limit: a nats.go service that decodes, appends under a per-subject condition and replies, 16 clients awaiting replies, rounds alternated; CPU per command %.0f µs vs %.0f µs; raw async publish %.0f/s",
			us(run.tidemarkCPU), us(run.limitCPU), rawTP)}
	latency := Figure{Name: "command latency p99 (one client)", Tidemark: us(p99), Limit: us(l99), Raw: us(percentile(rawLat, .99)), Unit: "µs",
		Ratio: us(p99) / us(l99), Goal: "<= 3.0 of the transport limit", Pass: us(p99)/us(l99) <= 3,
		Note: fmt.Sprintf("p50 %.0f µs vs %.0f µs; raw publish p99 %.0f µs", us(p50), us(l50), us(percentile(rawLat, .99)))}
	if sz.tenfold {
		big, err := measureCommands(ctx, 10*snaps, sz.commands, sz.latency)
		if err != nil {
			return nil, err
		}
		tp.Scale = scaled(snaps, 10*snaps, run.tidemark, big.tidemark, big.limit, 1/run.tidemark, 1/big.tidemark)
		b99 := us(percentile(big.lat, .99))
		latency.Scale = scaled(snaps, 10*snaps, us(p99), b99, us(percentile(big.limLat, .99)), us(p99), b99)
	}
	return []Figure{tp, latency}, nil
}
