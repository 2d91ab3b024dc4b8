package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
)

// Forwarding. In a cluster one engine, the writer, decides and appends;
// every other engine forwards the commands that write to it, on
// WriterSubject(kind), which only the writer subscribes to. The subject
// lives in the engine's own account (docs/auth.conf): no client can
// publish to it, so a forwarded command is one an engine already took
// from the wire and checked.

// WriterPrefix starts the subjects the writer serves forwarded commands on.
const WriterPrefix = "tidemark.writer"

// WriterSubject is the subject a command of kind is forwarded to.
func WriterSubject(kind string) string { return WriterPrefix + "." + kind }

// Writer serves forwarded commands while its engine is the writer.
type Writer struct {
	sub      *nats.Subscription
	mu       sync.Mutex
	stopped  bool
	inFlight sync.WaitGroup
}

// ServeWriter subscribes h to the forwarded commands. Each is handled on a
// goroutine of its own, at most concurrency at once (default 256).
func ServeWriter(nc *nats.Conn, h commands.Handler, timeout time.Duration, concurrency int, log *slog.Logger) (*Writer, error) {
	if concurrency <= 0 {
		concurrency = 256
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	w := &Writer{}
	slots := make(chan struct{}, concurrency)
	sub, err := nc.Subscribe(WriterPrefix+".*", func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return // not answered: the forwarder asks again
		}
		w.inFlight.Add(1)
		w.mu.Unlock()
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; w.inFlight.Done() }()
			kind := strings.TrimPrefix(m.Subject, WriterPrefix+".")
			var reply commands.Reply
			cmd, err := commands.DecodeForwarded(kind, commands.ContentMsgpack, m.Data)
			if err != nil {
				reply = commands.Rejection(err)
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				reply = h.Handle(ctx, cmd)
				cancel()
			}
			body, err := commands.EncodeReply(reply, false)
			if err != nil {
				log.Error("encode forwarded reply", "kind", kind, "err", err)
				return
			}
			if err := m.Respond(body); err != nil {
				log.Warn("respond to a forwarded command", "kind", kind, "err", err)
			}
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("transport: subscribe %s: %w", WriterPrefix, err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("transport: subscribe %s: %w", WriterPrefix, err)
	}
	w.sub = sub
	return w, nil
}

// Stop unsubscribes and waits for the commands being handled.
func (w *Writer) Stop() {
	_ = w.sub.Unsubscribe()
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.inFlight.Wait()
}

// ErrNoWriter is returned by Forward when no writer answered before ctx
// ended.
var ErrNoWriter = errors.New("transport: no writer is serving (an election is under way?)")

// Forward sends cmd to the writer and returns its reply. While no writer
// serves (during an election) it asks again every 50 ms until ctx ends. A
// forwarded command is sent exactly as received; the writer deduplicates a
// command id it already applied, so asking again is safe.
func Forward(ctx context.Context, nc *nats.Conn, cmd commands.Command) (commands.Reply, error) {
	body, err := commands.Encode(cmd, false)
	if err != nil {
		return commands.Reply{}, fmt.Errorf("transport: encode %s: %w", cmd.Kind(), err)
	}
	subj := WriterSubject(cmd.Kind())
	for {
		// Each attempt bounded: a writer that stops mid-request never
		// answers.
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := nc.RequestWithContext(actx, subj, body)
		cancel()
		if err == nil {
			return commands.DecodeReply(resp.Data, false)
		}
		if ctx.Err() != nil {
			return commands.Reply{}, fmt.Errorf("%w: %v", ErrNoWriter, err)
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return commands.Reply{}, fmt.Errorf("transport: forward %s: %w", cmd.Kind(), err)
		}
		select {
		case <-ctx.Done():
			return commands.Reply{}, fmt.Errorf("%w: %v", ErrNoWriter, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
