// Command tidemark is the tidemark CLI: serve, demo, scenario run, ….
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/transport"
)

// Exit statuses. Only exitCode picks them, from the error a command
// returns; the table is in exitHelp (tidemark --help) and the README.
const (
	exitOK          = 0 // accepted, ok
	exitFailed      = 1 // rejected, or a check failed
	exitUsage       = 2 // usage error, invalid input
	exitNotFound    = 3 // a command rejected with code not_found, an unknown sequence
	exitUnreachable = 4 // no server, no tidemark service, connection refused, timeout
)

// exitHelp documents the exit statuses in tidemark --help.
const exitHelp = `Exit status:
  0  accepted / ok
  1  rejected, or a check failed (promotion rejected, rollback refused, a conflict, verify or diff finding rows that differ, replay --verify divergence, damaged stream)
  2  usage error or invalid input, wherever it is found (a bad flag, or a command the server refuses as invalid, malformed, too_large or limit_exceeded)
  3  not found (a command rejected with code not_found, an unknown plan, environment or model, a plan or event sequence the stream does not hold)
  4  unreachable (no server or no tidemark service, connection refused, timeout, a server refusing with unavailable or rate_limited)`

// failure is what kind of failure a command reports; exitCode turns it
// into an exit status.
type failure int

const (
	failed      failure = iota + 1 // a rejection or a failed check
	usage                          // bad flags or input
	notFound                       // the thing asked for does not exist
	unavailable                    // the server could not answer in time
)

// exitError is a failure a command reports, of a kind.
type exitError struct {
	kind failure
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode picks the exit status for err (nil: 0): the one place that
// maps failures to statuses. Unreachable servers are recognised from the
// typed errors wrapped anywhere in err; then a command rejection
// (*commands.Error, from the engine or a warehouse reply) decides by its
// code (codeExit), wherever it was detected; then the kind of an
// exitError; any other error (cobra's flag and argument errors) is a
// usage error.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if unreachable(err) {
		return exitUnreachable
	}
	var ce *commands.Error
	if errors.As(err, &ce) {
		return codeExit(ce.Code)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		switch ee.kind {
		case failed:
			return exitFailed
		case notFound:
			return exitNotFound
		case unavailable:
			return exitUnreachable
		}
	}
	return exitUsage
}

// codeExit is the exit status of a command rejected with code c: invalid
// input (the server's own validation included) is 2, an unknown name 3,
// a server that could not do it now 4, any other refusal (a conflict, a
// reused id, a stale generation) 1.
func codeExit(c commands.Code) int {
	switch c {
	case commands.CodeInvalid, commands.CodeMalformed, commands.CodeTooLarge, commands.CodeLimit:
		return exitUsage
	case commands.CodeNotFound:
		return exitNotFound
	case commands.CodeUnavailable, commands.CodeRateLimited:
		return exitUnreachable
	}
	return exitFailed
}

// rejection is a refusal a warehouse reply carries as text and code:
// with a code, an error that reads as msg and wraps the *commands.Error
// exitCode maps; without, a failure.
func rejection(code, msg string) error {
	if code == "" {
		return &exitError{kind: failed, err: errors.New(msg)}
	}
	return &replyError{msg: msg, ce: &commands.Error{Code: commands.Code(code), Message: msg}}
}

// replyError is a warehouse reply's refusal: its text (which names its
// code already) and the code, for exitCode.
type replyError struct {
	msg string
	ce  *commands.Error
}

func (e *replyError) Error() string { return e.msg }
func (e *replyError) Unwrap() error { return e.ce }

// unreachable reports whether err says the server could not be reached.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.Is(err, transport.ErrNoService) || errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || (errors.As(err, &op) && op.Op == "dial")
}

// gcPercent is the GC target unless GOGC is set. The engine's live heap is
// small (projections take a few MiB) while commands allocate steadily, so
// at the default 100 the collector runs every few MiB of garbage; 400
// trades some memory for about 10 % more command throughput (measured:
// docs/performance.md).
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the CLI with args and returns its exit status, printing the
// error, if any, to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && err.Error() != "" {
		fmt.Fprintln(stderr, "tidemark:", err)
	}
	return exitCode(err)
}
