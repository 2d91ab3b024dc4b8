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

// defaultNatsURL is where `tidemark serve` listens by default.
const defaultNatsURL = "nats://127.0.0.1:4222"

// connect dials the server; failures are usage/connection errors (exit 2).
func connect(url string) (*nats.Conn, error) {
	nc, err := transport.Connect(url, nats.Name("tidemark-cli"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("cannot reach the tidemark server at %s: %v (is `tidemark serve` running? set --nats-url)", url, err)}
	}
	return nc, nil
}

// request sends one command and returns its reply; a transport failure or
// a rejected command is an error (exit 2 and 1).
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
		return r, &exitError{code: 2, err: fmt.Errorf("%s: %v", c.Kind(), err)}
	}
	if err := r.Err(); err != nil {
		return r, &exitError{code: 1, err: fmt.Errorf("%s rejected: %v", c.Kind(), err)}
	}
	return r, nil
}

type clientFlags struct{ natsURL, output string }

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.natsURL, "nats-url", defaultNatsURL, "the tidemark server's NATS URL")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")
}
