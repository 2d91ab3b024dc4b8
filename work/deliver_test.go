package work

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
)

// fakeLog is the part of the event log deliver uses in-process: a clock
// and a logger.
type fakeLog struct{ now time.Time }

func (l fakeLog) JetStream() jetstream.JetStream                                    { return nil }
func (l fakeLog) Bucket() jetstream.KeyValue                                        { return nil }
func (l fakeLog) Reader() *eventlog.Reader                                          { return nil }
func (l fakeLog) Now() time.Time                                                    { return l.now }
func (l fakeLog) Logger() *slog.Logger                                              { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (l fakeLog) Storage() (int, bool)                                              { return 1, true }
func (l fakeLog) Retry(ctx context.Context, call func(context.Context) error) error { return call(ctx) }

// scriptRunner answers its calls with errs in turn (nil once they run out).
type scriptRunner struct {
	errs  []error
	calls []time.Time
	// onCall runs at each call, before it answers.
	onCall func()
}

func (r *scriptRunner) Run(_ context.Context, _ Item, at time.Time) error {
	r.calls = append(r.calls, at)
	if r.onCall != nil {
		r.onCall()
	}
	if len(r.calls) <= len(r.errs) {
		return r.errs[len(r.calls)-1]
	}
	return nil
}

// TestDeliverInProcess pins how the publisher's in-process sink treats a
// Runner's outcome: transient failures are retried, a rejection retrying
// cannot change is given up (reported to Done, not returned, so later work
// is not held up), and a stop returns ctx's error without calling Done.
func TestDeliverInProcess(t *testing.T) {
	unavailable := commands.Errorf(commands.CodeUnavailable, "", "engine unavailable")
	invalid := commands.Errorf(commands.CodeInvalid, "work", "no such item")
	tests := []struct {
		name      string
		errs      []error
		wantCalls int
		wantDone  error // the error Done gets
	}{
		{"done at once", nil, 1, nil},
		{"transient failures retried", []error{unavailable, errors.New("nats: timeout"), commands.Errorf(commands.CodeConflict, "", "x")}, 4, nil},
		{"rejection given up", []error{invalid}, 1, invalid},
		{"rejection after a transient failure", []error{unavailable, invalid}, 2, invalid},
	}
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	item := Item{ID: events.WorkID(9, events.RunBackfill), RunKind: events.RunBackfill}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptRunner{errs: tt.errs}
			var done []error
			p := &Publisher{Log: fakeLog{now: now}, Runner: r, MaxBackoff: time.Microsecond,
				Done: func(it Item, err error) {
					if it.ID != item.ID {
						t.Errorf("Done for %s, want %s", it.ID, item.ID)
					}
					done = append(done, err)
				}}
			if err := p.deliver(t.Context(), item); err != nil {
				t.Fatalf("deliver: %v", err)
			}
			if len(r.calls) != tt.wantCalls {
				t.Errorf("Runner called %d times, want %d", len(r.calls), tt.wantCalls)
			}
			for _, c := range r.calls {
				if !c.Equal(now) {
					t.Errorf("Runner got clock %v, want the log's %v", c, now)
				}
			}
			if len(done) != 1 || done[0] != tt.wantDone {
				t.Errorf("Done got %v, want [%v]", done, tt.wantDone)
			}
		})
	}

	t.Run("stopped while retrying", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &scriptRunner{errs: []error{unavailable, unavailable}}
		r.onCall = func() {
			if len(r.calls) == 2 {
				cancel()
			}
		}
		called := false
		p := &Publisher{Log: fakeLog{now: now}, Runner: r, MaxBackoff: time.Microsecond, Done: func(Item, error) { called = true }}
		if err := p.deliver(ctx, item); !errors.Is(err, context.Canceled) {
			t.Errorf("deliver = %v, want context.Canceled", err)
		}
		if len(r.calls) != 2 || called {
			t.Errorf("Runner called %d times (want 2), Done called %v (want false)", len(r.calls), called)
		}
	})
}
