package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/replay"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// storeFlags select the stream a read-only command works on: the data dir
// of a stopped `serve` or of `scenario run --data-dir`, or a running server.
type storeFlags struct {
	dataDir, natsURL string
	atSeq            uint64
	at               string
}

func (s *storeFlags) register(cmd *cobra.Command, pointInTime bool) {
	f := cmd.Flags()
	f.StringVar(&s.dataDir, "data-dir", "", "the data dir of a stopped `tidemark serve` or of `scenario run --data-dir`")
	f.StringVar(&s.natsURL, "nats-url", "", "a running NATS server holding the TIDEMARK stream (e.g. the one `tidemark serve` listens on)")
	if pointInTime {
		f.Uint64Var(&s.atSeq, "at-seq", 0, "stop after this stream sequence")
		f.StringVar(&s.at, "at", "", "stop before the first event that occurred after this time (RFC 3339)")
	}
}

// open starts an engine on the selected stream.
func (s *storeFlags) open(ctx context.Context) (*engine.Engine, error) {
	if (s.dataDir == "") == (s.natsURL == "") {
		return nil, &exitError{code: 2, err: errors.New("give exactly one of --data-dir and --nats-url")}
	}
	if s.dataDir != "" {
		if _, err := os.Stat(s.dataDir); err != nil {
			return nil, &exitError{code: 2, err: err}
		}
	}
	cfg := engine.Config{DataDir: s.dataDir, NatsURL: s.natsURL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return e, nil
}

// options turns the point-in-time flags into replay options.
func (s *storeFlags) options() (replay.Options, error) {
	o := replay.Options{AtSeq: s.atSeq}
	if s.at != "" {
		t, err := time.Parse(time.RFC3339, s.at)
		if err != nil {
			return o, &exitError{code: 2, err: errors.New("--at: want RFC 3339, like 2026-12-01T11:07:00Z")}
		}
		o.At = t.UTC()
	}
	return o, nil
}

// read loads the selected prefix of the stream, with a progress bar on a
// terminal (events/s and ETA); nothing extra when stderr is not one.
func (s *storeFlags) read(cmd *cobra.Command) ([]replay.Record, *engine.Engine, error) {
	opts, err := s.options()
	if err != nil {
		return nil, nil, err
	}
	e, err := s.open(cmd.Context())
	if err != nil {
		return nil, nil, err
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
	recs, err := replay.ReadWith(cmd.Context(), e.JetStream(), opts)
	if p != nil {
		if bar != nil && !bar.Completed() {
			bar.SetTotal(-1, true)
		}
		p.Wait()
	}
	if err != nil {
		e.Close(context.WithoutCancel(cmd.Context()))
		return nil, nil, &exitError{code: 2, err: err}
	}
	return recs, e, nil
}
