package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tidemark/tidemark/checkpoint"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// storeFlags select the stream a read-only command works on: the data dir
// of a stopped `serve` or of `scenario run --data-dir`, or a running server.
type storeFlags struct {
	dataDir, natsURL string
	flags            *pflag.FlagSet
	atSeq            uint64
	at               string
}

func (s *storeFlags) register(cmd *cobra.Command, pointInTime bool) {
	f := cmd.Flags()
	s.flags = f
	f.StringVar(&s.dataDir, "data-dir", "", "read the data dir of a stopped tidemark serve or of scenario run --data-dir instead of a server")
	f.StringVar(&s.natsURL, "nats-url", defaultNatsURL, natsURLUsage+" (or any NATS server holding the TIDEMARK stream)")
	if pointInTime {
		f.Uint64Var(&s.atSeq, "at-seq", 0, "stop after this stream sequence")
		f.StringVar(&s.at, "at", "", "stop before the first event that occurred after this time (RFC 3339)")
	}
}

// stream opens the selected stream for reading (eventlog.OpenReader): an
// embedded server on the data dir (nothing is created or changed there,
// and a damaged store opens too), or a plain connection to the NATS
// server (nothing is created there). minLast is a sequence the stream is
// known to have reached (the data dir's checkpoint; 0: none). close
// releases it.
func (s *storeFlags) stream(ctx context.Context) (r *eventlog.Reader, minLast uint64, close func(), err error) {
	if s.dataDir != "" && s.flags != nil && s.flags.Changed("nats-url") {
		return nil, 0, nil, &exitError{kind: usage, err: errors.New("give one of --data-dir and --nats-url, not both")}
	}
	if s.dataDir == "" {
		if s.natsURL == "" {
			return nil, 0, nil, &exitError{kind: usage, err: errors.New("--nats-url is empty: give a server's URL or --data-dir")}
		}
		nc, err := transport.Connect(s.natsURL, nats.Name("tidemark-cli"), nats.Timeout(5*time.Second))
		if err != nil {
			return nil, 0, nil, &exitError{kind: usage, err: fmt.Errorf("cannot reach NATS at %s: %w", s.natsURL, err)}
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, 0, nil, &exitError{kind: usage, err: err}
		}
		r, err := eventlog.OpenReader(ctx, js)
		if err != nil {
			nc.Close()
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, 0, nil, &exitError{kind: notFound, err: fmt.Errorf("no %s stream at %s: %w", events.StreamName, s.natsURL, err)}
			}
			return nil, 0, nil, &exitError{kind: usage, err: err}
		}
		return r, 0, nc.Close, nil
	}
	if _, err := os.Stat(s.dataDir); err != nil {
		return nil, 0, nil, &exitError{kind: usage, err: err}
	}
	st, err := openStore(ctx, s.dataDir)
	if err != nil {
		return nil, 0, nil, &exitError{kind: usage, err: err}
	}
	return st.Reader(), st.checkpointSeq, st.Close, nil
}

// readStore is a stopped store opened for reading (openStore).
type readStore struct {
	node *natsnode.Node
	js   jetstream.JetStream
	r    *eventlog.Reader
	// checkpointSeq is the sequence of the projection checkpoint stored
	// with the stream (0: none): the stream held at least that many
	// events (eventlog.ReadOptions.MinLastSeq).
	checkpointSeq uint64
}

// JetStream is the store's JetStream context.
func (s *readStore) JetStream() jetstream.JetStream { return s.js }

// Reader reads the store's event stream.
func (s *readStore) Reader() *eventlog.Reader { return s.r }

// Close stops the embedded server.
func (s *readStore) Close() { s.node.Close() }

// openStore starts an embedded server on the data dir of a stopped store
// to read it: unlike the engine's Open it creates and changes nothing (no
// stream, no checkpoint) and folds no projection, so it opens a damaged
// store too; its Reader's Read then reports what the stream lost.
func openStore(ctx context.Context, dataDir string) (*readStore, error) {
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: dataDir, Name: "tidemark-reader"})
	if err != nil {
		return nil, err
	}
	s := &readStore{node: node}
	fail := func(err error) (*readStore, error) { s.Close(); return nil, err }
	if s.js, err = jetstream.New(node.Conn()); err != nil {
		return fail(fmt.Errorf("jetstream: %w", err))
	}
	if s.r, err = eventlog.OpenReader(ctx, s.js); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fail(fmt.Errorf("no %s stream in %s: not a tidemark data dir", events.StreamName, dataDir))
		}
		return fail(err)
	}
	if s.checkpointSeq, err = checkpoint.StoredSeq(ctx, s.js); err != nil {
		return fail(fmt.Errorf("checkpoint bucket: %w", err))
	}
	return s, nil
}

// options turns the point-in-time flags into read options.
func (s *storeFlags) options() (eventlog.ReadOptions, error) {
	o := eventlog.ReadOptions{AtSeq: s.atSeq}
	if s.at != "" {
		t, err := time.Parse(time.RFC3339, s.at)
		if err != nil {
			return o, &exitError{kind: usage, err: errors.New("--at: want RFC 3339, like 2026-12-01T11:07:00Z")}
		}
		o.At = t.UTC()
	}
	return o, nil
}

// read loads the selected prefix of the stream, with a progress bar on a
// terminal (events/s and ETA); nothing extra when stderr is not one. When
// the stream lost events or holds messages that are not tidemark events,
// it returns what it could read and the damage: the command shows what it
// can, then fails with damageExit.
func (s *storeFlags) read(cmd *cobra.Command) ([]events.Record, func(), *eventlog.Damage, error) {
	opts, err := s.options()
	if err != nil {
		return nil, nil, nil, err
	}
	r, minLast, closeStore, err := s.stream(cmd.Context())
	if err != nil {
		return nil, nil, nil, err
	}
	opts.MinLastSeq = minLast
	if opts.AtSeq > 0 {
		if last, err := r.LastSeq(cmd.Context()); err == nil && opts.AtSeq > last {
			closeStore()
			return nil, nil, nil, &exitError{kind: notFound, err: fmt.Errorf("--at-seq %d: the stream ends at seq %d", opts.AtSeq, last)}
		}
	}
	var p *mpb.Progress
	var bar *mpb.Bar
	if f, ok := cmd.ErrOrStderr().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p = mpb.New(mpb.WithOutput(f), mpb.WithWidth(40))
		opts.Progress = func(seq, last uint64) {
			if bar == nil {
				bar = p.AddBar(int64(last), mpb.PrependDecorators(decor.Name("replay "), decor.CountersNoUnit("%d / %d")),
					mpb.AppendDecorators(decor.AverageSpeed(0, " %.0f events/s"), decor.Name("  ETA "), decor.AverageETA(decor.ET_STYLE_GO)))
			}
			bar.SetCurrent(int64(seq))
		}
	}
	recs, err := r.Read(cmd.Context(), opts)
	if p != nil {
		if bar != nil && !bar.Completed() {
			bar.SetTotal(-1, true)
		}
		p.Wait()
	}
	d, damaged := eventlog.IsDamage(err)
	if err != nil && !damaged {
		closeStore()
		return nil, nil, nil, &exitError{kind: usage, err: err}
	}
	return recs, closeStore, d, nil
}

// damageExit fails a command that read a damaged stream (nil when d is):
// exit 1, naming every missing sequence and every message that is not a
// tidemark event (sequence and subject), after the output of what could
// be read.
func damageExit(d *eventlog.Damage) error {
	if d == nil {
		return nil
	}
	return &exitError{kind: failed, err: d}
}

// pointInTime reports whether the flags ask for history rather than now.
func (s *storeFlags) pointInTime() bool { return s.dataDir != "" || s.at != "" || s.atSeq != 0 }

// lastAt is the time of the last decoded record (zero when none).
func lastAt(recs []events.Record) time.Time {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Err == nil {
			return recs[i].Event.OccurredAt
		}
	}
	return time.Time{}
}
