package integration

// Hostile but authenticated clients on the wire (issue 15, items 2, 3, 7
// and 9): each test starts the embedded server with docs/auth.conf, tries
// the attack as a role of that file, and asserts the defence.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work"
)

// authEnv is an engine on the example users of docs/auth.conf, serving
// commands over NATS, with the work stream prepared.
type authEnv struct {
	e   *engine.Engine
	url string // the server's client URL
	pub *work.Publisher
}

func newAuthEnv(t *testing.T, svcCfg transport.ServiceConfig, pub *work.Publisher) *authEnv {
	t.Helper()
	return newAuthEnvFile(t, "../docs/auth.conf", svcCfg, pub)
}

// The users' files: docs/auth.conf (the engine's account and one account
// per client role) and the same users in one account.
const (
	authConf       = "../docs/auth.conf"
	oneAccountConf = "testdata/oneaccount.conf"
)

// newAuthEnvFile is newAuthEnv on the users of file.
func newAuthEnvFile(t *testing.T, file string, svcCfg transport.ServiceConfig, pub *work.Publisher) *authEnv {
	t.Helper()
	cfg := authConfig("")
	cfg.AuthFile = file
	node := jstest.Node(t, cfg)
	e := open(t, engine.Config{}, node)
	if pub == nil {
		pub = &work.Publisher{}
	}
	pub.Log, pub.Clock, pub.Logger = e.Log(), e.Now, quiet()
	if err := pub.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	svcCfg.Logger = quiet()
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, svcCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return &authEnv{e: e, url: node.ClientURL(), pub: pub}
}

// storeCounts are the message counts of every stream a reply could be
// captured by: the events, the work queue and the checkpoint bucket.
func storeCounts(t *testing.T, e *engine.Engine) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, name := range []string{events.StreamName, work.Stream, "KV_" + eventlog.BucketName} {
		s, err := e.Log().JetStream().Stream(t.Context(), name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out[name] = info.State.LastSeq
	}
	return out
}

// subjectCounts are the message counts per subject of the streams a reply
// could be captured by.
func subjectCounts(t *testing.T, e *engine.Engine) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, name := range []string{events.StreamName, work.Stream, "KV_" + eventlog.BucketName} {
		s, err := e.Log().JetStream().Stream(t.Context(), name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for subj, n := range info.State.Subjects {
			out[subj] = n
		}
	}
	return out
}

// rawCommand is a command body as the shipped client encodes it.
func rawCommand(t *testing.T, cmd commands.Command) []byte {
	t.Helper()
	b, err := commands.Encode(cmd, true)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commandSubjects are the subjects a user may address a command of kind
// to: the unauthenticated form and the form that names the user.
func commandSubjects(user, kind string) []string {
	return []string{"tidemark.cmd." + kind, "tidemark.cmd." + user + "." + kind}
}

// TestRepliesNeverReachStreams (issue 15, item 2): a service user sets its
// request's reply subject to subjects the event stream, the work stream
// and the checkpoint bucket capture, or to another user's inbox. No reply
// reaches any of them: nothing is stored on those subjects, and the other
// user's inbox stays silent. A request with the user's own inbox is still
// answered.
//
// With docs/auth.conf the service's requests reach the engine through its
// account's import, with a reply subject the server made (_R_.…) that leads
// back to the service's own account, whatever it named: the engine cannot
// see the named one, handles the request, and its reply can only land in
// the service's account, which holds no stream and no other user. With
// every user in one account (testdata/oneaccount.conf) the engine sees the
// named reply and refuses the request before handling it: nothing is
// appended at all.
func TestRepliesNeverReachStreams(t *testing.T) {
	for name, file := range map[string]string{"accounts": authConf, "one account": oneAccountConf} {
		t.Run(name, func(t *testing.T) { testRepliesNeverReachStreams(t, file) })
	}
}

func testRepliesNeverReachStreams(t *testing.T, file string) {
	env := newAuthEnvFile(t, file, transport.ServiceConfig{}, nil)
	e, clientURL := env.e, env.url
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(6)), Plan: "p9", Env: "prod", Versions: map[string]string{"events": "v1"}}))

	// The worker listens on its own inbox space for anything addressed to it.
	wConn, _ := asUser(t, clientURL, "worker")
	var stolen atomic.Int32
	if _, err := wConn.Subscribe("_INBOX.worker.>", func(*nats.Msg) { stolen.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := wConn.Flush(); err != nil {
		t.Fatal(err)
	}
	before, beforeSubjects := storeCounts(t, e), subjectCounts(t, e)

	sConn, _ := asUser(t, clientURL, "service")
	hostile := []string{
		events.PlanSubject("p9"), events.SubjectPrefix + "env.prod", events.SubjectPrefix + "forged",
		work.Subject(events.RunBackfill), work.SubjectPrefix + "forged",
		"$KV." + eventlog.BucketName + ".work_cursor", "$KV." + eventlog.BucketName + ".projections",
		"_INBOX.worker.stolen.1", "_INBOX.stolen",
	}
	sent := 0
	for i, reply := range hostile {
		for _, c := range []commands.Command{
			&commands.Status{},
			&commands.RegisterSnapshot{Meta: commands.Meta{ID: fmt.Sprintf("hostile-%d", i), Actor: "mallory"}, Model: fmt.Sprintf("forged%d", i), Version: "v1", Cron: "@hourly", Start: t0},
		} {
			for _, subj := range commandSubjects("service", c.Kind()) {
				m := nats.NewMsg(subj)
				m.Reply = reply
				m.Header.Set(commands.HeaderContentType, commands.ContentJSON)
				m.Data = rawCommand(t, c)
				if err := sConn.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
				sent++
			}
		}
	}
	if err := sConn.Flush(); err != nil {
		t.Fatal(err)
	}
	// The legitimate request, sent after the hostile ones, is answered:
	// every hostile one was looked at before it.
	c := transport.NewClient(sConn)
	c.Timeout = 5 * time.Second
	if r, err := c.Do(ctx, &commands.Status{}); err != nil || !r.Accepted {
		t.Fatalf("a legitimate request: %v %+v", err, r)
	}
	time.Sleep(300 * time.Millisecond)
	afterSubjects := subjectCounts(t, e)
	for _, subj := range hostile {
		if afterSubjects[subj] != beforeSubjects[subj] {
			t.Errorf("%d hostile requests stored %d message(s) on %s", sent, afterSubjects[subj]-beforeSubjects[subj], subj)
		}
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the engine replied %d time(s) into the worker's inbox on the service's behalf", n)
	}
	if file != oneAccountConf {
		return
	}
	after := storeCounts(t, e)
	for name, n := range before {
		if after[name] != n {
			t.Errorf("%d hostile requests appended %d message(s) to %s", sent, after[name]-n, name)
		}
	}
	e.Projection().Read(func(st *projections.State) {
		for i := range hostile {
			if _, ok := st.Snapshots[fmt.Sprintf("forged%d@v1", i)]; ok {
				t.Errorf("a request with a hostile reply subject was handled (forged%d@v1 registered)", i)
			}
		}
	})
}

// TestInboxesArePrivate (issue 15, item 3): a worker or auditor that
// subscribes to the whole inbox space, or to another role's inbox space,
// is refused by the server and sees nothing, while a service request and
// an auditor's read of the stream go through.
func TestInboxesArePrivate(t *testing.T) {
	env := newAuthEnv(t, transport.ServiceConfig{}, nil)
	e, clientURL := env.e, env.url
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))

	var seen sync.Map
	var sniffed atomic.Int32
	sniff := func(role string, subjects ...string) func() []string {
		nc, violations := asUser(t, clientURL, role)
		for _, s := range subjects {
			s := s
			if _, err := nc.Subscribe(s, func(m *nats.Msg) { sniffed.Add(1); seen.Store(role+" on "+s+": "+m.Subject, true) }); err != nil {
				t.Fatal(err)
			}
		}
		_ = nc.Flush()
		return violations
	}
	wViolations := sniff("worker", "_INBOX.>", "_INBOX.service.>", "_INBOX.auditor.>", "_INBOX.*.*.*")
	aViolations := sniff("auditor", "_INBOX.>", "_INBOX.service.>", "_INBOX.worker.>")

	sConn, _ := asUser(t, clientURL, "service")
	c := transport.NewClient(sConn)
	c.Timeout = 5 * time.Second
	for i := 0; i < 3; i++ {
		if r, err := c.Do(ctx, &commands.Status{}); err != nil || !r.Accepted {
			t.Fatalf("service request/reply: %v %+v", err, r)
		}
	}
	aConn, _ := asUser(t, clientURL, "auditor")
	ajs, _ := jetstream.New(aConn)
	if recs, err := jstest.ReadLog(ctx, ajs); err != nil || len(recs) == 0 {
		t.Fatalf("auditor replay: %d records, %v", len(recs), err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := sniffed.Load(); n != 0 {
		var l []string
		seen.Range(func(k, _ any) bool { l = append(l, k.(string)); return true })
		t.Fatalf("sniffers saw %d message(s) of other users:\n%s", n, strings.Join(l, "\n"))
	}
	for role, v := range map[string][]string{"worker": wViolations(), "auditor": aViolations()} {
		if !contains(v, `Permissions Violation for Subscription to "_INBOX.>"`) {
			t.Errorf("%s subscribing to _INBOX.> was not refused: %v", role, v)
		}
	}
	if !contains(wViolations(), `Permissions Violation for Subscription to "_INBOX.service.>"`) {
		t.Errorf("worker subscribing to the service's inbox was not refused: %v", wViolations())
	}
}

// TestRateLimitPerUser (issue 15, item 7): a service user that gives every
// request a fresh reply inbox, over two connections, still gets no more
// than the per-user burst plus the rate; another user is not held back.
func TestRateLimitPerUser(t *testing.T) {
	const rate, burst = 2, 4
	env := newAuthEnv(t, transport.ServiceConfig{RateLimit: rate, RateBurst: burst}, nil)
	clientURL := env.url
	ctx := t.Context()

	var accepted, limited atomic.Int32
	replies := make(chan struct{}, 1000)
	started := time.Now()
	sent := 0
	for conn := 0; conn < 2; conn++ {
		nc, _ := asUser(t, clientURL, "service")
		if _, err := nc.Subscribe(fmt.Sprintf("_INBOX.service.c%d.>", conn), func(m *nats.Msg) {
			if m.Header.Get("Status") != "" {
				return // no responders and the like
			}
			r, err := commands.DecodeReply(m.Data, commands.IsJSON(m.Header.Get(commands.HeaderContentType)))
			if err != nil {
				return
			}
			switch {
			case r.Accepted:
				accepted.Add(1)
			case r.Code == commands.CodeRateLimited:
				limited.Add(1)
			}
			replies <- struct{}{}
		}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 15; i++ {
			for _, subj := range commandSubjects("service", commands.KindStatus) {
				m := nats.NewMsg(subj)
				m.Reply = fmt.Sprintf("_INBOX.service.c%d.r%d.x", conn, i) // a fresh "connection" every time
				m.Header.Set(commands.HeaderContentType, commands.ContentJSON)
				m.Data = []byte(`{}`)
				if err := nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
				sent++
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(5 * time.Second)
wait:
	for accepted.Load()+limited.Load() < 30 {
		select {
		case <-replies:
		case <-deadline:
			break wait
		}
	}
	elapsed := time.Since(started).Seconds()
	bound := int32(burst + rate*elapsed + 1)
	if a := accepted.Load(); a > bound || a < 1 {
		t.Fatalf("%d requests from fresh inboxes: %d accepted (%d rate limited) in %.1fs; want 1..%d", sent, a, limited.Load(), elapsed, bound)
	}
	// Another user has its own allowance.
	wConn, _ := asUser(t, clientURL, "worker")
	wc := transport.NewClient(wConn)
	wc.Timeout = 5 * time.Second
	r, err := wc.Do(ctx, &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: meta(at(1)), Model: "nosuch", Version: "v1", Ranges: []interval.Range{rng(0, 1)}, Work: "work-1-backfill"}})
	if err != nil || r.Code == commands.CodeRateLimited {
		t.Fatalf("the worker was held back by the service's flood: %v %+v", err, r)
	}
}

// TestJetStreamAnswersIntoStreams: nats-server answers a JetStream API
// request (info, a pull, a direct get) at whatever reply subject the
// requester names, and in the requester's own account a stream that
// captures that subject would store the answer; no permission within one
// account forbids it (testdata/oneaccount.conf lets a worker or an auditor
// write into the event stream, the work queue and the checkpoint bucket,
// overwriting the work cursor). docs/auth.conf closes it: the worker and
// the auditor reach the JetStream API through their accounts' imports, so
// every answer goes back to their own account, which holds no stream.
// Nothing is stored on any of the named subjects, and nothing is appended
// to the streams.
func TestJetStreamAnswersIntoStreams(t *testing.T) {
	env := newAuthEnvFile(t, authConf, transport.ServiceConfig{}, nil)
	e, clientURL := env.e, env.url
	ctx := t.Context()
	// A work item for the pulls to take.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = env.pub.Run(runCtx) }()
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v1", Cron: "@hourly", Start: t0}))
	must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "w1", Env: "prod", Versions: map[string]string{"events": "v1"}}))
	deadline := time.Now().Add(10 * time.Second)
	for storeCounts(t, e)[work.Stream] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no work item was published")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done

	before, beforeSubjects := storeCounts(t, e), subjectCounts(t, e)
	hostile := []string{events.SubjectPrefix + "forged", work.SubjectPrefix + "forged", "$KV." + eventlog.BucketName + ".work_cursor"}
	requests := map[string][][2]string{
		"worker": {
			{"$JS.API.INFO", ""},
			{"$JS.API.STREAM.INFO." + work.Stream, ""},
			{"$JS.API.CONSUMER.INFO." + work.Stream + "." + work.Consumer, ""},
			{"$JS.API.CONSUMER.MSG.NEXT." + work.Stream + "." + work.Consumer, `{"batch":1,"no_wait":true}`},
		},
		"auditor": {
			{"$JS.API.INFO", ""},
			{"$JS.API.STREAM.INFO." + events.StreamName, ""},
			{"$JS.API.DIRECT.GET." + events.StreamName, `{"seq":1}`},
			{"$JS.API.DIRECT.GET." + events.StreamName, `{"seq":1,"batch":5}`},
		},
	}
	for role, reqs := range requests {
		nc, _ := asUser(t, clientURL, role)
		for _, req := range reqs {
			for _, reply := range hostile {
				m := nats.NewMsg(req[0])
				m.Reply = reply
				m.Data = []byte(req[1])
				if err := nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	after, afterSubjects := storeCounts(t, e), subjectCounts(t, e)
	for _, subj := range hostile {
		if afterSubjects[subj] != beforeSubjects[subj] {
			t.Errorf("JetStream answers stored %d message(s) on %s", afterSubjects[subj]-beforeSubjects[subj], subj)
		}
	}
	for name, n := range before {
		if after[name] != n {
			t.Errorf("JetStream answers appended %d message(s) to %s", after[name]-n, name)
		}
	}
}
