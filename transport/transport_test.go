package transport

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/internal/jstest"
)

func TestReplyAllowed(t *testing.T) {
	for _, c := range []struct {
		user  string
		named bool
		reply string
		want  bool
	}{
		{"service", true, "_INBOX.service.abc.def", true},
		{"service", true, "_INBOX.service.x", true},
		{"service", true, "_INBOX.service", false},
		{"service", true, "_INBOX.service.", false},
		{"service", true, "_INBOX.worker.abc.def", false},
		{"service", true, "_INBOX.servicex.abc", false},
		{"service", true, "_INBOX.abc.def", false},
		{"service", true, "tidemark.evt.plan.p1", false},
		{"service", true, "tidemark.work.backfill", false},
		{"service", true, "$KV.TIDEMARK_CHECKPOINTS.work_cursor", false},
		{"service", true, "", false},
		{"service", true, "_INBOX.service.a..b", false},
		{"service", true, "_INBOX.service.*", false},
		{"service", true, "_INBOX.service.>", false},
		{"service", true, "_INBOX.service.a b", false},
		{"service", true, "_R_.aBcDeF.gHiJkL", true},
		{"service", true, "_R_.aBcDeF.*", false},
		{"service", true, "_R_.", false},
		{"service", true, "_R_", false},
		{"", false, "_R_.aBcDeF.gHiJkL", false},
		{"bad.user", true, "_R_.aBcDeF.gHiJkL", false},
		{"bad.user", true, "_INBOX.bad.user.x", false},
		{"", true, "_INBOX..x", false},
		{"", false, "_INBOX.abc.def", true},
		{"", false, "_INBOX.service.abc.def", true},
		{"", false, "tidemark.evt.plan.p1", false},
		{"", false, "", false},
		{"", false, "_INBOX_x.y", false},
	} {
		if got := ReplyAllowed(c.user, c.named, c.reply); got != c.want {
			t.Errorf("ReplyAllowed(%q, %v, %q) = %v, want %v", c.user, c.named, c.reply, got, c.want)
		}
	}
}

func TestSubjects(t *testing.T) {
	if s := CommandSubject("service", "promote"); s != "tidemark.cmd.service.promote" {
		t.Errorf("CommandSubject: %s", s)
	}
	if s := CommandSubject("", "promote"); s != "tidemark.cmd.promote" {
		t.Errorf("CommandSubject without user: %s", s)
	}
	for subj, want := range map[string]string{"tidemark.cmd.service.promote": "service", "tidemark.cmd.promote": "", "other.x.y": ""} {
		user, named := senderOf(subj)
		if user != want || named != (want != "") {
			t.Errorf("senderOf(%s) = %q %v", subj, user, named)
		}
	}
	for u, want := range map[string]string{
		"nats://service:pw@127.0.0.1:4222": "service", "tls://w-1:pw@h:1,tls://w-1:pw@h:2": "w-1",
		"nats://127.0.0.1:4222": "", "": "",
	} {
		if got := URLUser(u); got != want {
			t.Errorf("URLUser(%s) = %q, want %q", u, got, want)
		}
	}
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", strings.Repeat("x", 65), "ü"} {
		if ValidUser(bad) == nil {
			t.Errorf("ValidUser(%q) passed", bad)
		}
	}
	if userOfInboxPrefix("_INBOX.worker") != "worker" || userOfInboxPrefix("") != "" || userOfInboxPrefix("_INBOX.a.b") != "" {
		t.Error("userOfInboxPrefix")
	}
}

// TestLimiterPerKey: a key's burst, then its rate; keys are independent.
func TestLimiterPerKey(t *testing.T) {
	l := NewLimiter(2, 3)
	now := time.Unix(0, 0)
	n := 0
	for i := 0; i < 10; i++ {
		if l.allow(rateKey("service", true, "_INBOX.service.r"+string(rune('a'+i))+".x"), now) {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("fresh inboxes of one user: %d allowed, want the burst 3", n)
	}
	if !l.allow(rateKey("worker", true, "_INBOX.worker.a.b"), now) {
		t.Fatal("another user was held back")
	}
	if !l.allow(rateKey("service", true, "_INBOX.service.z.x"), now.Add(time.Second)) {
		t.Fatal("the rate did not refill")
	}
}

// slowHandler accepts every command after d.
type slowHandler struct{ d time.Duration }

func (h slowHandler) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	time.Sleep(h.d) // the command's work, as the stats must see it
	return commands.Reply{Accepted: true}
}

// The endpoint stats' data measures the whole command, which micro's own
// processing time (the hand-off to a goroutine) does not.
func TestStatsMeasureTheWholeCommand(t *testing.T) {
	nc, err := nats.Connect("", nats.InProcessServer(jstest.Node(t).Server()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	svc, err := Serve(nc, slowHandler{50 * time.Millisecond}, ServiceConfig{Logger: jstest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	c := NewClient(nc)
	for i := 0; i < 2; i++ {
		if r, err := c.Do(t.Context(), &commands.RegisterSnapshot{Model: "m", Version: "v1", Cron: "@hourly", Start: time.Unix(0, 0).UTC()}); err != nil || !r.Accepted {
			t.Fatalf("do: %v %+v", err, r)
		}
	}
	// A command is counted once its reply is sent, which may be after the
	// client has it: wait (bounded) until both are counted.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var cs CommandStats
		var micro time.Duration
		found := false
		for _, ep := range svc.Stats().Endpoints {
			if ep.Name != commands.KindRegisterSnapshot {
				continue
			}
			if err := json.Unmarshal(ep.Data, &cs); err != nil {
				t.Fatal(err)
			}
			micro, found = ep.AverageProcessingTime, true
		}
		if !found {
			t.Fatal("no register_snapshot endpoint")
		}
		if cs.Commands == 2 || time.Now().After(deadline) {
			if cs.Commands != 2 || cs.Rejected != 0 || cs.AverageProcessingTime < int64(50*time.Millisecond) {
				t.Fatalf("stats %+v (micro's own: %s)", cs, micro)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClientAsksAgainWhileNotServed: a command nobody serves yet (an
// election: only the writer serves the commands that write), or that a
// stopping service turned away before handling it (503), is sent again
// until a service handles it, within NoServiceWait; after that the client
// says ErrNoService.
func TestClientAsksAgainWhileNotServed(t *testing.T) {
	srv := jstest.Node(t).Server()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cmd := func() commands.Command {
		return &commands.RegisterSnapshot{Model: "m", Version: "v1", Cron: "@hourly", Start: time.Unix(0, 0).UTC()}
	}

	c := NewClient(nc)
	c.NoServiceWait = 0
	if _, err := c.Do(t.Context(), cmd()); !errors.Is(err, ErrNoService) {
		t.Fatalf("nothing served, no wait: %v, want ErrNoService", err)
	}

	// Turned away while stopping: a subscriber answering 503, as a
	// stopping service does, then a service.
	sub, err := nc.Subscribe(CommandSubject("", commands.KindRegisterSnapshot), func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(micro.ErrorCodeHeader, stoppingCode)
		r.Header.Set(micro.ErrorHeader, "service stopping")
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	started := make(chan *Service, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // the election
		_ = sub.Unsubscribe()
		svc, err := Serve(nc, slowHandler{0}, ServiceConfig{Logger: jstest.Quiet()})
		if err != nil {
			t.Error(err)
		}
		started <- svc
	}()
	c.NoServiceWait = 10 * time.Second
	r, err := c.Do(t.Context(), cmd())
	if svc := <-started; svc != nil {
		defer svc.Stop()
	}
	if err != nil || !r.Accepted {
		t.Fatalf("served after 200 ms: %v %+v", err, r)
	}
}
