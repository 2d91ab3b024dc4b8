package integration

// The consumers of the work and event streams (issue 15, item 9): a
// worker binds to the consumer the engine provisions and cannot change
// it; an auditor cannot create consumers beyond its bound.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/shell"
)

// TestWorkerCannotReconfigureWorkConsumer (issue 15, item 9a): the engine
// provisions the durable work consumer; a worker cannot create, update or
// add a consumer on the work stream (permission error, config unchanged),
// and a real worker bound to the provisioned consumer still does its work.
func TestWorkerCannotReconfigureWorkConsumer(t *testing.T) {
	env := newAuthEnv(t, transport.ServiceConfig{}, nil)
	e, clientURL := env.e, env.url
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	wConn, violations := asUser(t, clientURL, "worker")
	wjs, _ := jetstream.New(wConn)
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }
	for _, cfg := range []jetstream.ConsumerConfig{
		{Durable: work.Consumer, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 1, AckWait: time.Hour, MaxAckPending: 1},
		{Durable: "mallory", AckPolicy: jetstream.AckExplicitPolicy},
		{Name: "mallory2", AckPolicy: jetstream.AckNonePolicy, FilterSubject: work.Subject(events.RunBackfill)},
	} {
		cctx, ccancel := short()
		_, err := wjs.CreateOrUpdateConsumer(cctx, work.Stream, cfg)
		ccancel()
		if err == nil {
			t.Errorf("the worker created or updated consumer %s%s", cfg.Durable, cfg.Name)
		}
	}
	if !contains(violations(), `Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.`+work.Stream) {
		t.Errorf("no permission violation for the worker's consumer create: %v", violations())
	}
	ws, err := e.Log().JetStream().Stream(ctx, work.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ws.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 1 {
		t.Errorf("work stream has %d consumers, want the one the engine provisioned", info.State.Consumers)
	}
	ci, err := e.Log().JetStream().Consumer(ctx, work.Stream, work.Consumer)
	if err != nil {
		t.Fatalf("the engine did not provision %s: %v", work.Consumer, err)
	}
	if cfg := ci.CachedInfo().Config; cfg.MaxDeliver == 1 || cfg.AckWait == time.Hour || cfg.MaxAckPending == 1 {
		t.Errorf("the worker reconfigured the work consumer: %+v", cfg)
	}

	// The real worker, as the worker user, binds and works.
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = env.pub.Run(runCtx) }()
	x := &shell.Worker{JS: wjs, Handler: transport.NewClient(wConn), Command: "true", Name: "bound", Logger: quiet(), Output: &strings.Builder{}}
	wg.Add(1)
	go func() { defer wg.Done(); _ = x.Run(runCtx) }()
	defer func() { stop(); wg.Wait() }()
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v1", Cron: "@hourly", Start: t0}))
	must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "w1", Env: "prod", Versions: map[string]string{"events": "v1"}}))
	if err := e.Projection().Await(ctx, covered("events@v1", rng(0, 3))); err != nil {
		t.Fatalf("the bound worker did not complete the backfill: %v", err)
	}
	// Its acks reached the consumer (through its account's import of the
	// ack subjects, docs/auth.conf): nothing is left pending.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := ci.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's acks did not reach the work consumer: %d delivered, %d ack pending, %d pending", info.Delivered.Consumer, info.NumAckPending, info.NumPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// auditorMaxConsumers is how many consumers the auditor may create on the
// event stream: none, it reads with direct gets.
const auditorMaxConsumers = 0

// TestAuditorConsumersBounded (issue 15, item 9b): the auditor reads the
// stream without server-side state, and cannot create consumers beyond
// its bound (none); its reads still work.
func TestAuditorConsumersBounded(t *testing.T) {
	env := newAuthEnv(t, transport.ServiceConfig{}, nil)
	e, clientURL := env.e, env.url
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	stream, err := e.Log().JetStream().Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	base := consumers()

	aConn, violations := asUser(t, clientURL, "auditor")
	ajs, _ := jetstream.New(aConn)
	const tries = 6
	created := 0
	for i := 0; i < tries; i++ {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		var err error
		switch i % 3 {
		case 0:
			_, err = ajs.OrderedConsumer(cctx, events.StreamName, jetstream.OrderedConsumerConfig{})
		case 1:
			_, err = ajs.CreateConsumer(cctx, events.StreamName, jetstream.ConsumerConfig{Name: fmt.Sprintf("audit%d", i), InactiveThreshold: time.Hour})
		case 2:
			_, err = ajs.CreateConsumer(cctx, events.StreamName, jetstream.ConsumerConfig{Durable: fmt.Sprintf("audit%d", i), FilterSubject: events.SubjectAll})
		}
		cancel()
		if err == nil {
			created++
		}
	}
	const bound = auditorMaxConsumers
	if n := consumers() - base; created > bound || n > bound {
		t.Fatalf("the auditor created %d consumers (%d on the stream beyond the engine's); the bound is %d", created, n, bound)
	}
	if bound == 0 && !contains(violations(), `Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.`+events.StreamName) {
		t.Errorf("no permission violation for the auditor's consumer create: %v", violations())
	}
	// Its reads still work, and leave nothing behind.
	recs, err := jstest.ReadLog(ctx, ajs)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Seq != lastSeq(t, e) {
		t.Fatalf("auditor replay: %d records, %v", len(recs), err)
	}
	if n := consumers() - base; n > bound {
		t.Fatalf("the auditor's read left %d consumers", n)
	}
}
