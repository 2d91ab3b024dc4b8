package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/transport"
)

// defaultNatsURL is where tidemark serve listens by default: the default
// of every --nats-url that names a tidemark server.
const defaultNatsURL = "nats://127.0.0.1:4222"

// natsURLUsage is the usage of every --nats-url that names a tidemark server.
const natsURLUsage = "the tidemark server's NATS URL"

// connect dials the server; a failure wraps the NATS error (exit 4 when
// the server is unreachable, exitCode).
func connect(url string) (*nats.Conn, error) {
	nc, err := transport.Connect(url, nats.Name("tidemark-cli"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, &exitError{kind: usage, err: fmt.Errorf("cannot reach the tidemark server at %s: %w (is tidemark serve running? set --nats-url)", url, err)}
	}
	return nc, nil
}

// request sends one command and returns its reply; a transport failure or
// a rejected command is an error wrapping the cause (transport's, or the
// *commands.Error of the rejection), so exitCode tells them apart.
func request(cmd *cobra.Command, url string, c commands.Command) (commands.Reply, error) {
	nc, err := connect(url)
	if err != nil {
		return commands.Reply{}, err
	}
	defer nc.Close()
	return send(cmd.Context(), nc, c)
}

func send(ctx context.Context, nc *nats.Conn, c commands.Command) (commands.Reply, error) {
	r, err := transport.NewClient(nc).Do(ctx, c)
	if err != nil {
		return r, &exitError{kind: usage, err: fmt.Errorf("%s: %w", c.Kind(), err)}
	}
	if err := r.Err(); err != nil {
		return r, &exitError{kind: failed, err: fmt.Errorf("%s rejected: %w", c.Kind(), err)}
	}
	return r, nil
}

type clientFlags struct{ natsURL, output string }

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.natsURL, "nats-url", defaultNatsURL, natsURLUsage)
	outputFlag(cmd, &f.output, "table", "json")
}

// pause waits every (less when deadline comes first) between two asks of
// a polling verb; a cancelled ctx is a usage exitError.
func pause(ctx context.Context, every time.Duration, deadline time.Time) error {
	t := time.NewTimer(min(every, time.Until(deadline)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &exitError{kind: usage, err: ctx.Err()}
	case <-t.C:
		return nil
	}
}
