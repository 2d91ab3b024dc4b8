// Command tidemark is the tidemark CLI: serve, demo, scenario run, ….
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// exitError carries an exit status chosen by a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

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
	defer stop()
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(os.Stderr, "tidemark:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "tidemark:", err)
	os.Exit(2)
}
