// Package transport carries commands over NATS: the micro service that
// serves a commands.Handler (one endpoint per command kind, bounded
// concurrency, per-user rate limit) and the client that sends commands and
// decodes replies. It knows the wire, not the rules.
//
// Who sent a command, and where its reply may go. A client of NATS user U
// sends commands to tidemark.cmd.U.<kind> and takes replies on its own
// inbox space _INBOX.U.> (nats.CustomInboxPrefix, see InboxOption). With
// the permissions of docs/auth.conf the server lets only U publish under
// tidemark.cmd.U. and only U subscribe to _INBOX.U.>, so the subject names
// the authenticated sender and the inbox space is private to it. The
// service answers a request only when its reply subject lies in that
// sender's inbox space, and refuses it before handling otherwise: it never
// publishes to another user's inbox, nor to any subject outside _INBOX.>,
// where every stream subject lies (events, work, the checkpoint bucket).
// The unauthenticated form tidemark.cmd.<kind> (no user; only the admin
// may publish it under docs/auth.conf) is answered on any _INBOX. subject.
//
// Under docs/auth.conf each client user lives in an account of its own that
// imports its command subjects from the engine's account: its requests
// arrive with a reply subject the server made (_R_.…), whose answer the
// server routes back to the importing account, never into the engine's
// account (where the streams are) nor into another client's. The service
// answers those; the user's own account holds nothing else to reach.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/tidemark/tidemark/commands"
)

// ServiceName is the NATS micro service name (visible to `nats micro ls`).
const ServiceName = "tidemark"

// ServiceVersion is the micro service version.
const ServiceVersion = "0.1.0"

// Service serves commands over NATS request/reply.
type Service struct {
	svc      micro.Service
	mu       sync.Mutex // orders inFlight.Add before Stop's Wait
	stopped  bool
	inFlight sync.WaitGroup
	workers  *pool
}

// ServiceConfig configures Serve.
type ServiceConfig struct {
	// QueueGroup is the micro queue group; replicas share one. Default "tidemark".
	QueueGroup string
	// Timeout bounds the handling of one command. Default 30s.
	Timeout time.Duration
	// RateLimit is how many commands per second one user may send (all its
	// connections together; the user is the one its command subject names,
	// which the server's permissions bind to the authenticated user), with
	// bursts of RateBurst (default 2×RateLimit). A command on the
	// unauthenticated subject counts against its connection's inbox
	// instead. 0: no limit. A command over the limit is rejected
	// (rate_limited) before it is handled.
	RateLimit float64
	RateBurst int
	// Concurrency bounds the commands handled at once (micro calls an
	// endpoint's handler from one goroutine; each command then runs on one
	// of up to this many goroutines, which live on between commands).
	// Default 64.
	Concurrency int
	Logger      *slog.Logger
	// Limiter, when set, is the rate limit to count against, shared with
	// other services (cluster.Member.Serve shares one between its queries
	// and its writes, so a user's commands count once whichever serves
	// them); RateLimit and RateBurst are then not used.
	Limiter *Limiter
	// Kinds are the command kinds served, one endpoint each (default
	// commands.Kinds). A cluster member serves Queries always and Writes
	// only while it is the writer (cluster.Member.Serve).
	Kinds []string
}

// Queries are the command kinds that only read (commands.Query): any
// member answers them from its own projection.
func Queries() []string { return kindsWhere(true) }

// Writes are the other command kinds: the writer carries them out.
func Writes() []string { return kindsWhere(false) }

func kindsWhere(query bool) []string {
	var out []string
	for _, k := range commands.Kinds {
		c, _ := commands.New(k)
		if _, q := c.(commands.Query); q == query {
			out = append(out, k)
		}
	}
	return out
}

// Serve registers the tidemark micro service on nc with one endpoint per
// command kind. Bad bodies are rejected before the handler sees them.
func Serve(nc *nats.Conn, h commands.Handler, cfg ServiceConfig) (*Service, error) {
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = "tidemark"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Kinds == nil {
		cfg.Kinds = commands.Kinds
	}
	stats := &commandStats{byEndpoint: map[string]*endpointStats{}}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "tidemark promotion control plane commands",
		QueueGroup:  cfg.QueueGroup,
		// micro times a handler, which hands each command to a goroutine
		// of its own at once: the stats' data carries the whole command.
		StatsHandler: stats.of,
	})
	if err != nil {
		return nil, fmt.Errorf("transport: add service: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	service := &Service{svc: svc, workers: newPool(cfg.Concurrency)}
	g := svc.AddGroup(commands.SubjectPrefix)
	limiter := cfg.Limiter
	if limiter == nil {
		limiter = NewLimiter(cfg.RateLimit, cfg.RateBurst)
	}
	refusals := NewLimiter(1, 10) // log lines about refused requests, per sender
	for _, kind := range cfg.Kinds {
		kind := kind
		serve := func(r micro.Request, key string, es *endpointStats, started time.Time) {
			var reply commands.Reply
			defer func() { es.record(time.Since(started), reply.Accepted) }()
			ct := r.Headers().Get(commands.HeaderContentType)
			asJSON := commands.IsJSON(ct)
			cmd, err := commands.Decode(kind, ct, r.Data())
			if limiter != nil && !limiter.allow(key, time.Now()) {
				reply = commands.Rejection(commands.Errorf(commands.CodeRateLimited, "", "more than %g commands per second from this user; retry with the same id later", cfg.RateLimit))
			} else if err != nil {
				reply = commands.Rejection(err)
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
				reply = h.Handle(ctx, cmd)
				cancel()
			}
			body, err := commands.EncodeReply(reply, asJSON)
			if err != nil {
				cfg.Logger.Error("encode reply", "kind", kind, "err", err)
				_ = r.Error("500", "cannot encode reply", nil)
				return
			}
			hdr := msgpackReplyHeaders
			if asJSON {
				hdr = jsonReplyHeaders
			}
			if err := r.Respond(body, micro.WithHeaders(hdr)); err != nil {
				cfg.Logger.Warn("respond", "kind", kind, "err", err)
			}
		}
		handler := func(es *endpointStats) micro.Handler {
			return micro.HandlerFunc(func(r micro.Request) {
				started := time.Now()
				user, named := senderOf(r.Subject())
				key := rateKey(user, named, r.Reply())
				if !ReplyAllowed(user, named, r.Reply()) {
					// Refused before anything else: no reply (the reply subject
					// is not the sender's inbox), no handling. It counts
					// against the sender's rate; its log lines are sampled.
					now := time.Now()
					if limiter != nil {
						limiter.allow(key, now)
					}
					if refusals.allow(key, now) {
						cfg.Logger.Warn("refused a command whose reply subject is not the sender's inbox", "subject", r.Subject(), "reply", r.Reply())
					}
					return
				}
				service.mu.Lock()
				if service.stopped {
					// A request delivered while Stop drains: the client retries.
					service.mu.Unlock()
					_ = r.Error(stoppingCode, "service stopping", nil)
					return
				}
				service.inFlight.Add(1)
				service.mu.Unlock()
				// At most Concurrency at once (back-pressure), on goroutines
				// that live on between commands.
				service.workers.run(func() {
					defer service.inFlight.Done()
					serve(r, key, es, started)
				})
			})
		}
		if err := g.AddEndpoint(kind, handler(stats.endpoint(kind)), micro.WithEndpointQueueGroup(cfg.QueueGroup)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("transport: add endpoint %s: %w", kind, err)
		}
		if err := svc.AddEndpoint(userEndpointPrefix+kind, handler(stats.endpoint(userEndpointPrefix+kind)), micro.WithEndpointQueueGroup(cfg.QueueGroup),
			micro.WithEndpointSubject(CommandSubject("*", kind))); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("transport: add endpoint %s: %w", userEndpointPrefix+kind, err)
		}
	}
	// Make sure the server has registered every endpoint's subscription
	// before callers on other connections send requests.
	if err := nc.FlushTimeout(cfg.Timeout); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("transport: flush endpoint subscriptions: %w", err)
	}
	return service, nil
}

// stoppingCode is the micro error code of a request that arrived while
// the service was stopping: not handled, so the client asks again.
const stoppingCode = "503"

// The reply headers, shared by every reply (never modified).
var (
	msgpackReplyHeaders = micro.Headers{commands.HeaderContentType: {commands.ContentMsgpack}}
	jsonReplyHeaders    = micro.Headers{commands.HeaderContentType: {commands.ContentJSON}}
)

// Stop drains the service's subscriptions.
func (s *Service) Stop() error {
	err := s.svc.Stop()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.inFlight.Wait()
	s.workers.stop()
	return err
}

// Info is the micro service info.
func (s *Service) Info() micro.Info { return s.svc.Info() }

// Stats is the micro service's stats; each endpoint's Data is its
// CommandStats.
func (s *Service) Stats() micro.Stats { return s.svc.Stats() }

// CommandStats measure whole commands, from the handler's start to the
// reply sent (decoding, waiting for a slot, deciding, appending, and
// replying), which micro's own processing time does not: its handler only
// hands each command on. They are each endpoint's stats Data (`nats micro
// stats tidemark`).
type CommandStats struct {
	Commands int64 `json:"commands"`
	// Rejected counts commands answered with a rejection.
	Rejected int64 `json:"rejected"`
	// ProcessingTime and AverageProcessingTime are in nanoseconds.
	ProcessingTime        int64 `json:"processing_time"`
	AverageProcessingTime int64 `json:"average_processing_time"`
}

type commandStats struct {
	mu         sync.Mutex
	byEndpoint map[string]*endpointStats
}

type endpointStats struct {
	commands, rejected, nanos atomic.Int64
}

func (c *commandStats) endpoint(name string) *endpointStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := &endpointStats{}
	c.byEndpoint[name] = es
	return es
}

func (c *commandStats) of(e *micro.Endpoint) any {
	c.mu.Lock()
	es := c.byEndpoint[e.Name]
	c.mu.Unlock()
	if es == nil {
		return CommandStats{}
	}
	st := CommandStats{Commands: es.commands.Load(), Rejected: es.rejected.Load(), ProcessingTime: es.nanos.Load()}
	if st.Commands > 0 {
		st.AverageProcessingTime = st.ProcessingTime / st.Commands
	}
	return st
}

func (es *endpointStats) record(d time.Duration, accepted bool) {
	es.commands.Add(1)
	es.nanos.Add(int64(d))
	if !accepted {
		es.rejected.Add(1)
	}
}

// Client sends commands to a tidemark service.
type Client struct {
	nc *nats.Conn
	// User is the NATS user the client sends as: commands go to
	// tidemark.cmd.<User>.<kind>, and the connection's replies must come
	// to _INBOX.<User>.>. NewClient takes it from the connection's inbox
	// prefix (InboxOption); "" sends on the unauthenticated subjects.
	User string
	// JSON selects JSON bodies instead of msgpack.
	JSON bool
	// Timeout bounds every request (the context may end it sooner).
	// Default 30s; 0: only the context bounds it.
	Timeout time.Duration
	// NoServiceWait is how long Do keeps asking, every 50 ms, while no
	// service answers a command that writes (nats.ErrNoResponders, or a
	// 503 from a service that was stopping): in a cluster only the writer
	// serves them, and none does while one is elected (the lease's TTL,
	// 2 s by default, and the new writer's catch-up). Then Do returns
	// ErrNoService. A query is not asked again: every member serves the
	// queries. Default 5s (NewClient); 0: at once.
	NoServiceWait time.Duration

	// seen is the highest stream sequence a reply gave this client: sent
	// as every later command's after_seq (read-your-writes on any node).
	seen atomic.Uint64
}

// Seen is the highest stream sequence a reply gave this client.
func (c *Client) Seen() uint64 { return c.seen.Load() }

// NewClient returns a client over nc, sending as the user whose inbox
// prefix nc has (see InboxOption), if any.
func NewClient(nc *nats.Conn) *Client {
	return &Client{nc: nc, User: UserOf(nc), Timeout: 30 * time.Second, NoServiceWait: 5 * time.Second}
}

// queryKinds are Queries, for Do.
var queryKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range Queries() {
		m[k] = true
	}
	return m
}()

// noServiceRetry is how often Do asks again while no service answers.
const noServiceRetry = 50 * time.Millisecond

// notServed reports whether a request was not handled: nobody serves its
// subject, or the service was stopping (503, answered before handling).
func notServed(resp *nats.Msg, err error) bool {
	if err != nil {
		return errors.Is(err, nats.ErrNoResponders)
	}
	return resp.Header.Get(micro.ErrorCodeHeader) == stoppingCode
}

// ErrNoService is returned when no tidemark service answers.
var ErrNoService = errors.New("transport: no tidemark service is listening")

// Do sends cmd and waits for the reply. An empty id is filled with a fresh
// one, so retry a failed Do with the same cmd value to keep its id. A
// rejection is a commands.Reply with Accepted false, not an error; errors are
// transport failures.
func (c *Client) Do(ctx context.Context, cmd commands.Command) (commands.Reply, error) {
	m := cmd.Header()
	if m.ID == "" {
		m.ID = commands.NewID()
	}
	if seen := c.seen.Load(); seen > m.AfterSeq {
		m.AfterSeq = seen
	}
	body, err := commands.Encode(cmd, c.JSON)
	if err != nil {
		return commands.Reply{}, fmt.Errorf("transport: encode %s: %w", cmd.Kind(), err)
	}
	msg := nats.NewMsg(CommandSubject(c.User, cmd.Kind()))
	msg.Data = body
	if c.JSON {
		msg.Header.Set(commands.HeaderContentType, commands.ContentJSON)
	}
	// msgpack, the default, goes without headers: the service reads a
	// request without Content-Type as msgpack, and a message without
	// headers costs both connections less.
	if c.Timeout > 0 {
		// A request whose responder died is never answered: bound every
		// request, whatever the caller's deadline.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	resp, err := c.nc.RequestMsgWithContext(ctx, msg)
	wait := c.NoServiceWait
	if queryKinds[cmd.Kind()] {
		wait = 0 // every member serves the queries: none serving is no tidemark at all
	}
	for waited := time.Duration(0); notServed(resp, err) && waited < wait; waited += noServiceRetry {
		// No member serves the kind now, or the one that did is stopping
		// (it answered before handling): in a cluster, the writer is being
		// elected (only the writer serves commands that write).
		select {
		case <-ctx.Done():
			return commands.Reply{}, fmt.Errorf("transport: %s: %w while %w", cmd.Kind(), ctx.Err(), ErrNoService)
		case <-time.After(noServiceRetry):
		}
		resp, err = c.nc.RequestMsgWithContext(ctx, msg)
	}
	if notServed(resp, err) {
		return commands.Reply{}, ErrNoService
	}
	if err != nil {
		return commands.Reply{}, fmt.Errorf("transport: %s: %w", cmd.Kind(), err)
	}
	if code := resp.Header.Get(micro.ErrorCodeHeader); code != "" {
		return commands.Reply{}, fmt.Errorf("transport: %s: service error %s: %s", cmd.Kind(), code, resp.Header.Get(micro.ErrorHeader))
	}
	r, err := commands.DecodeReply(resp.Data, commands.IsJSON(resp.Header.Get(commands.HeaderContentType)))
	if err == nil {
		for seen := c.seen.Load(); r.Seq > seen && !c.seen.CompareAndSwap(seen, r.Seq); seen = c.seen.Load() {
		}
	}
	return r, err
}

// Handle implements commands.Handler over NATS: a transport failure is answered as
// an unavailable rejection (retry with the same id).
func (c *Client) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	r, err := c.Do(ctx, cmd)
	if err != nil {
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", err))
	}
	return r
}

// userEndpointPrefix names the endpoints of the subjects that name the
// sender (tidemark.cmd.*.<kind>).
const userEndpointPrefix = "user_"

// InboxRoot starts every reply subject: no stream may capture it.
const InboxRoot = "_INBOX"

// ImportReplyRoot starts the reply subject the server gives a request that
// reached the service through a service import (docs/auth.conf: each
// client account imports its user's command subjects from the engine's
// account). No client may name such a reply itself, and the answer goes
// back to the importing account, to the reply subject its requester named
// there: never to a stream of the engine's account, nor to another
// account.
const ImportReplyRoot = "_R_"

// CommandSubject is the subject a command of kind is sent to by user:
// tidemark.cmd.<user>.<kind>, or tidemark.cmd.<kind> with no user.
func CommandSubject(user, kind string) string {
	if user == "" {
		return commands.Subject(kind)
	}
	return commands.SubjectPrefix + "." + user + "." + kind
}

// InboxPrefix is user's own reply inbox prefix, _INBOX.<user> (the prefix
// nats.CustomInboxPrefix takes: inboxes are <prefix>.<id>...).
func InboxPrefix(user string) string { return InboxRoot + "." + user }

// ValidUser reports whether user can name its subjects and inbox: one
// subject token of letters, digits, '-' and '_'.
func ValidUser(user string) error {
	if user == "" || len(user) > 64 {
		return fmt.Errorf("transport: user name %q: want 1 to 64 letters, digits, '-' or '_'", user)
	}
	for _, c := range user {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("transport: user name %q: want only letters, digits, '-' or '_' (it names the user's command subjects and reply inbox)", user)
		}
	}
	return nil
}

// InboxOption gives a connection of user its own reply inbox prefix,
// _INBOX.<user>: every request the connection makes (commands, JetStream
// API calls, consumer deliveries) is answered there, and docs/auth.conf
// lets only that user subscribe to it. No user: the default _INBOX.
func InboxOption(user string) nats.Option {
	return func(o *nats.Options) error {
		if user == "" {
			return nil
		}
		if err := ValidUser(user); err != nil {
			return err
		}
		return nats.CustomInboxPrefix(InboxPrefix(user))(o)
	}
}

// URLUser is the user name in the credentials of a NATS URL (the first of
// a comma-separated list), or "".
func URLUser(natsURL string) string {
	first, _, _ := strings.Cut(natsURL, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}

// Connect dials natsURL with opts and the reply inbox prefix of the URL's
// user (InboxOption): how every tidemark client connects.
func Connect(natsURL string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(natsURL, append(opts, InboxOption(URLUser(natsURL)))...)
}

// UserOf is the user nc sends as: the user of its reply inbox prefix
// (InboxOption, which Connect sets from the URL's user), or "". Its
// commands go to CommandSubject(UserOf(nc), kind).
func UserOf(nc *nats.Conn) string { return userOfInboxPrefix(nc.Opts.InboxPrefix) }

// userOfInboxPrefix is the user of a connection's inbox prefix
// (_INBOX.<user>), or "".
func userOfInboxPrefix(prefix string) string {
	user, ok := strings.CutPrefix(prefix, InboxRoot+".")
	if !ok || ValidUser(user) != nil {
		return ""
	}
	return user
}

// senderOf is the user a command subject names: tidemark.cmd.<user>.<kind>
// gives user, true; tidemark.cmd.<kind> gives "", false.
func senderOf(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, commands.SubjectPrefix+".")
	if !ok {
		return "", false
	}
	user, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	return user, true
}

// ReplyAllowed reports whether the service may answer a request of user
// (named: the subject named one) at reply: a literal subject within the
// user's inbox space _INBOX.<user>.>, or, for the unauthenticated subject,
// within _INBOX.>. Stream subjects never lie there. A request that names
// its user and came through a service import (from the user's own account)
// has a reply the server made, _R_.<...>, which it routes back to that
// account: allowed too. An empty reply (a request nobody waits for) is not
// allowed either: a command is answered or not handled.
func ReplyAllowed(user string, named bool, reply string) bool {
	space := InboxRoot + "."
	if named {
		if ValidUser(user) != nil {
			return false
		}
		space = InboxPrefix(user) + "."
		if strings.HasPrefix(reply, ImportReplyRoot+".") {
			space = ImportReplyRoot + "."
		}
	}
	rest, ok := strings.CutPrefix(reply, space)
	if !ok || rest == "" || len(reply) > 1024 {
		return false
	}
	for _, tok := range strings.Split(rest, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// rateKey is whom a request counts against: its user, or, on the
// unauthenticated subject, its connection's inbox.
func rateKey(user string, named bool, reply string) string {
	if named {
		return "user:" + user
	}
	return "inbox:" + clientOf(reply)
}

// clientOf identifies the connection a request came from by its reply
// subject: a connection's requests share one inbox prefix
// (_INBOX.<id>.<token>). Only for unauthenticated requests: any client can
// vary it.
func clientOf(reply string) string {
	if i := strings.LastIndexByte(reply, '.'); i > 0 {
		return reply[:i]
	}
	return reply
}

// Limiter is a per-user rate limit: a token bucket per sender.
type Limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewLimiter returns a limit of rate commands a second per sender, with
// bursts of burst (default 2×rate); nil (no limit) when rate <= 0.
func NewLimiter(rate float64, burst int) *Limiter {
	if rate <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = int(2*rate) + 1
	}
	return &Limiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
}

// maxClients bounds the buckets kept; idle full buckets are dropped first.
const maxClients = 10_000

func (l *Limiter) allow(client string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[client]
	if !ok {
		if len(l.buckets) >= maxClients {
			for k, old := range l.buckets {
				if old.tokens+now.Sub(old.last).Seconds()*l.rate >= l.burst {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[client] = b
	}
	b.tokens += now.Sub(b.last).Seconds() * l.rate
	if b.tokens > l.burst {
		b.tokens = l.burst
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
