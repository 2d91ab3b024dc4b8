package shell

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/work"
)

// TestConsumerFormat: a worker reads the work format serve records in the
// consumer's metadata: this build's (batches, completions with rows); none
// (an older serve: the worker reports no rows, which that serve's decoder
// would refuse); a newer one it refuses to start with, saying to update
// the worker.
func TestConsumerFormat(t *testing.T) {
	node := jstest.Node(t)
	js, err := jetstream.New(node.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, work.StreamConfig(1, true)); err != nil {
		t.Fatal(err)
	}
	bind := func(meta map[string]string) (*Worker, error) {
		t.Helper()
		cfg := work.ConsumerConfig(work.DefaultAckWait, work.DefaultMaxDeliver)
		cfg.Metadata = meta
		if _, err := js.CreateOrUpdateConsumer(ctx, work.Stream, cfg); err != nil {
			t.Fatal(err)
		}
		w := &Worker{JS: js, Name: "f", Logger: jstest.Quiet()}
		_, err := w.Consumer(ctx)
		return w, err
	}
	if w, err := bind(map[string]string{work.FormatKey: work.Format}); err != nil || w.legacy {
		t.Fatalf("this format: legacy %v, %v", w.legacy, err)
	}
	if w, err := bind(nil); err != nil || !w.legacy {
		t.Fatalf("no format (an older serve): legacy %v, %v; want legacy", w.legacy, err)
	}
	if _, err := bind(map[string]string{work.FormatKey: "3"}); err == nil || !strings.Contains(err.Error(), "update the worker") {
		t.Fatalf("a newer format: %v, want a refusal saying to update the worker", err)
	}
}

// rowsComputer computes every batch, reporting n rows and one failed
// audit.
type rowsComputer int64

func (n rowsComputer) Compute(context.Context, work.Batch) (work.Result, error) {
	return work.Result{Rows: int64(n), Audits: []events.AuditOutcome{{Audit: "not_null", Count: 3}}}, nil
}

// TestCompletionRows: a completion carries the rows and the audits'
// outcomes the Computer reports, and neither for a serve of the older
// format (legacy).
func TestCompletionRows(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		h := &reports{}
		w := worker(h, "")
		w.Compute, w.legacy = rowsComputer(7), legacy
		if err := w.runItem(t.Context(), item(), 1); err != nil {
			t.Fatal(err)
		}
		want, audits := int64(7), 1
		if legacy {
			want, audits = 0, 0
		}
		for _, c := range h.cmds {
			cw := c.(*commands.CompleteWork)
			if cw.Rows != want || len(cw.Audits) != audits {
				t.Errorf("legacy %v: rows %d, audits %v; want %d rows, %d audits", legacy, cw.Rows, cw.Audits, want, audits)
			}
			if audits > 0 && (cw.Audits[0].Audit != "not_null" || cw.Audits[0].Count != 3 || cw.Audits[0].Passed) {
				t.Errorf("the audit reported: %+v", cw.Audits[0])
			}
		}
		if len(h.cmds) != 3 {
			t.Errorf("legacy %v: %d completions, want 3", legacy, len(h.cmds))
		}
	}
}
