package main

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
)

// serve coalesces concurrent completions into group messages, with fsync
// or without; --no-coalesce keeps every event on its own subject (for
// consumers that filter the stream on the server).
func TestServeCoalesceFlag(t *testing.T) {
	for _, tc := range []struct {
		sync, flag string
		groups     bool
	}{{"--no-sync=false", "--no-coalesce=false", true}, {"--no-sync", "--no-coalesce=false", true}, {"--no-sync=false", "--no-coalesce", false}} {
		t.Run(tc.sync+tc.flag, func(t *testing.T) {
			s := startServe(t, tc.sync, tc.flag)
			nc, err := nats.Connect(s.nats)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx := t.Context()
			c := transport.NewClient(nc)
			start := time.Now().UTC().Truncate(time.Hour).Add(-64 * time.Hour)
			const models = 32
			for i := range models {
				if r, err := c.Do(ctx, &commands.RegisterSnapshot{Model: fmt.Sprintf("m%d", i), Version: "v1", Cron: "@hourly", Start: start}); err != nil || !r.Accepted {
					t.Fatalf("register: %+v %v", r, err)
				}
			}
			// Rounds of concurrent completions, until a group forms (or,
			// without coalescing, as many rounds).
			js, _ := jetstream.New(nc)
			st, err := js.Stream(ctx, events.StreamName)
			if err != nil {
				t.Fatal(err)
			}
			grouped := func() bool {
				_, err := st.GetLastMsgForSubject(ctx, eventlog.GroupSubject)
				if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
					t.Fatal(err)
				}
				return err == nil
			}
			for round := 0; round < 20 && !grouped(); round++ {
				var wg sync.WaitGroup
				for i := range models {
					wg.Add(1)
					go func() {
						defer wg.Done()
						h := start.Add(time.Duration(round) * time.Hour)
						r, err := c.Do(ctx, &commands.CompleteIntervals{Model: fmt.Sprintf("m%d", i), Version: "v1", Ranges: []interval.Range{interval.R(h, h.Add(time.Hour))}, RunKind: "backfill"})
						if err != nil || !r.Accepted {
							t.Errorf("complete: %+v %v", r, err)
						}
					}()
				}
				wg.Wait()
			}
			if got := grouped(); got != tc.groups {
				t.Fatalf("%s: group messages stored: %v, want %v", tc.flag, got, tc.groups)
			}
		})
	}
}
