package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/shell"
)

// asUser connects to the server at clientURL with the example file's
// credentials of role and that user's own reply inbox prefix (as every
// shipped client does), collecting permission violations.
func asUser(t *testing.T, clientURL, role string) (*nats.Conn, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var violations []string
	nc, err := nats.Connect(clientURL, nats.UserInfo(role, role+"-change-me"), nats.CustomInboxPrefix("_INBOX."+role),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatalf("%s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), violations...) }
}

// TestPermissions: with docs/auth.conf, each role can do exactly its set.
func TestPermissions(t *testing.T) {
	node := authNode(t, "")
	e := open(t, engine.Config{}, node)
	clientURL := node.ClientURL()
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(6)), Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v2"}}))

	if _, err := nats.Connect(clientURL); err == nil {
		t.Fatal("an anonymous client connected")
	}
	short := func(nc *nats.Conn) *transport.Client { c := transport.NewClient(nc); c.Timeout = time.Second; return c }

	// service: commands, yes.
	svcConn, _ := asUser(t, clientURL, "service")
	if r, err := short(svcConn).Do(ctx, &commands.Status{}); err != nil || !r.Accepted {
		t.Fatalf("service status: %v %+v", err, r)
	}

	// worker: reports of work items yes (checked against the item: here
	// there is none), completions without one and promotions no.
	wConn, wViolations := asUser(t, clientURL, "worker")
	before := lastSeq(t, e)
	if r, err := short(wConn).Do(ctx, &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: meta(at(7)), Model: "events", Version: "v2",
		Ranges: []interval.Range{rng(0, 1)}, Work: "work-1-backfill"}}); err != nil || r.Code != commands.CodeNotFound || r.Field != "work" {
		t.Fatalf("worker report of no work item: %v %+v", err, r)
	}
	if r, err := short(wConn).Do(ctx, &commands.CheckWork{CompleteWork: commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: meta(at(7)), Model: "events", Version: "v2",
		Ranges: []interval.Range{rng(0, 1)}, Work: "work-1-backfill"}}}); err != nil || r.Code != commands.CodeNotFound || r.Field != "work" {
		t.Fatalf("worker check of no work item: %v %+v", err, r)
	}
	if _, err := short(wConn).Do(ctx, &commands.CompleteIntervals{Meta: meta(at(7)), Model: "events", Version: "v2", Ranges: []interval.Range{rng(0, 1)}}); err == nil {
		t.Fatal("a worker sent a completion without a work item")
	}
	if _, err := short(wConn).Do(ctx, &commands.Promote{Meta: meta(at(7)), Plan: "p2"}); err == nil {
		t.Fatal("a worker promoted a plan")
	}
	if !contains(wViolations(), `Permissions Violation for Publish to "tidemark.cmd.worker.complete_intervals"`) {
		t.Fatalf("worker completion: violations %v", wViolations())
	}
	if !contains(wViolations(), `Permissions Violation for Publish to "tidemark.cmd.worker.promote"`) {
		t.Fatalf("worker promote: violations %v", wViolations())
	}
	// restate is an operator's command: the service sends it (here refused
	// on its own terms, before any warehouse: nothing covered), a worker
	// cannot.
	if _, err := short(wConn).Do(ctx, &commands.Restate{Meta: meta(at(7)), Env: "prod", Model: "events", Ranges: []interval.Range{rng(0, 1)}}); err == nil {
		t.Fatal("a worker restated a model")
	}
	if !contains(wViolations(), `Permissions Violation for Publish to "tidemark.cmd.worker.restate"`) {
		t.Fatalf("worker restate: violations %v", wViolations())
	}
	if r, err := short(svcConn).Do(ctx, &commands.Restate{Meta: meta(at(7)), Env: "prod", Model: "events", Ranges: []interval.Range{rng(40, 41)}}); err != nil || r.Code != commands.CodeInvalid || r.Field != "ranges" {
		t.Fatalf("service restate: %v %+v", err, r)
	}
	// The engine provisions the work stream and consumer; the worker binds.
	if err := (&work.Publisher{Log: e.Log(), Clock: e.Now, Logger: quiet()}).Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	wjs, _ := jetstream.New(wConn)
	x := &shell.Worker{JS: wjs, Handler: short(wConn)}
	if _, err := x.Consumer(ctx); err != nil {
		t.Fatalf("the worker cannot set up its consumer: %v", err)
	}
	// Its heartbeat reaches the engine's roster (serve's, in the engine's
	// account).
	roster := &work.Roster{}
	stopRoster, err := roster.Subscribe(e.Log().JetStream().Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer stopRoster()
	hbCtx, stopHB := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		work.Beat(hbCtx, wConn, "w-auth", work.KindSQL, 20*time.Millisecond, &work.Stats{})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for live := roster.Live(); len(live) != 1 || live[0].Name != "w-auth"; live = roster.Live() {
		if time.Now().After(deadline) {
			v := wViolations()
			t.Fatalf("the worker's heartbeat did not reach the engine: %+v; %d violations, the last %v", live, len(v), v[len(v)-1:])
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	stopHB()
	<-hbDone

	// auditor: reads the stream, publishes no command, cannot purge.
	aConn, aViolations := asUser(t, clientURL, "auditor")
	ajs, _ := jetstream.New(aConn)
	recs, err := jstest.ReadLog(ctx, ajs)
	if err != nil || len(recs) == 0 {
		t.Fatalf("auditor replay: %d records, %v", len(recs), err)
	}
	if _, err := short(aConn).Do(ctx, &commands.Promote{Meta: meta(at(7)), Plan: "p2"}); err == nil {
		t.Fatal("the auditor promoted a plan")
	}
	stream, err := ajs.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := stream.Purge(pctx); err == nil {
		t.Fatal("the auditor purged the stream")
	}
	dctx, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if err := ajs.DeleteStream(dctx, events.StreamName); err == nil {
		t.Fatal("the auditor deleted the stream")
	}
	v := strings.Join(aViolations(), "\n")
	for _, want := range []string{`"tidemark.cmd.auditor.promote"`, `"$JS.API.STREAM.PURGE.TIDEMARK"`, `"$JS.API.STREAM.DELETE.TIDEMARK"`} {
		if !strings.Contains(v, want) {
			t.Fatalf("auditor violations lack %s:\n%s", want, v)
		}
	}
	if lastSeq(t, e) != before {
		t.Fatalf("refused commands appended %d events", lastSeq(t, e)-before)
	}

	// Even the admin cannot purge: the stream denies it.
	as, err := e.Log().JetStream().Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Purge(ctx); err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) && !strings.Contains(err.Error(), "purge") {
		t.Fatalf("admin purge: %v", err)
	}
}

func contains(l []string, sub string) bool {
	for _, s := range l {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestTLS: with a certificate, network clients must use TLS.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)

	node := jstest.Node(t, natsnode.Config{TLSCert: certFile, TLSKey: keyFile})
	open(t, engine.Config{}, node)
	addr := strings.TrimPrefix(strings.TrimPrefix(node.ClientURL(), "nats://"), "tls://")
	if nc, err := nats.Connect("nats://"+addr, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a plain-text client connected")
	}
	pool := x509.NewCertPool()
	pool.AddCert(must509(t, der))
	nc, err := nats.Connect("tls://"+addr, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	defer nc.Close()
	if _, err := jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
}

func must509(t *testing.T, der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStoreAccount: a store made without accounts keeps its streams in the
// global account; opening it with docs/auth.conf (whose engine account is
// TIDEMARK) is refused rather than started over on empty streams, and
// works once the account's directory is moved, with the events kept.
func TestStoreAccount(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	node := jstest.Node(t, natsnode.Config{DataDir: dir})
	e := open(t, engine.Config{}, node)
	deploy(t, e, "prod", "d1", "v1", at(6))
	seq := lastSeq(t, e)
	e.Close(ctx)
	node.Close()

	cfg := authConfig(dir)
	cfg.Listen = "127.0.0.1:-1"
	if n, err := natsnode.Start(ctx, cfg); err == nil {
		n.Close()
		t.Fatal("a store of the global account was opened in the TIDEMARK account")
	} else if !strings.Contains(err.Error(), `account "$G"`) {
		t.Fatalf("refusal: %v", err)
	}
	js := filepath.Join(dir, "jetstream", "jetstream")
	if err := os.Rename(filepath.Join(js, "$G"), filepath.Join(js, "TIDEMARK")); err != nil {
		t.Fatal(err)
	}
	e = open(t, engine.Config{}, jstest.Node(t, cfg))
	if got := lastSeq(t, e); got != seq {
		t.Fatalf("after the move: last sequence %d, want %d", got, seq)
	}
}
