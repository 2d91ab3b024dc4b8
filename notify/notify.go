// Package notify POSTs a JSON document (Notice) to an operator's URL for
// each decision (promotion, rollback, restatement), each work item given
// up, and each change of an incumbent's lateness (`serve --notify-url`;
// docs/notifications.md documents the document).
//
// Invariants:
//   - It never blocks the engine: the Notifier reads the stream with its
//     own consumer (eventlog.Reader.Tail) into a bounded queue that one
//     sender drains; a slow or failing endpoint only holds the notifier.
//   - Nothing is dropped silently. Its cursor (the last event handled, key
//     notify_cursor in the state bucket, like the work publisher's) moves
//     past a notice only once the endpoint acknowledged it (2xx) or
//     refused it for good (another 4xx, logged as an error). A failing
//     endpoint (network error, timeout, 408, 425, 429, 5xx) gets Attempts
//     attempts with exponential backoff; when they are exhausted the
//     notifier logs an error and tries the same notice again after Pause,
//     for as long as it runs, later notices waiting behind it; after a
//     restart it resumes from its cursor.
//   - Each notice has an idempotency key (the Idempotency-Key header and
//     the field key) derived from the stream: a notice sent again (after a
//     restart before its cursor was saved, or by a new writer) has the
//     same key, so the receiver can drop it.
//   - Lateness is judged here, on the live state and the caller's clock
//     (Late), never in decide or the projections; the incumbents known
//     late are kept in the state bucket (notify_late), so a restart sends
//     no change twice.
//
// It takes the engine's parts as fields, never the engine: Log (the
// *eventlog.Log it follows, whose state bucket keeps its cursor), View and
// Now (the live state and the clock lateness is judged on), Logger.
//
// Run it on the writer only (serve does, like the scheduler): one sender
// per cluster. Importers: server (serve runs it), cmd/tidemark (serve's
// flags fill a Notifier's settings).
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/projections"
)

// Defaults of a Notifier's settings.
const (
	DefaultAttempts   = 5
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 30 * time.Second
	DefaultPause      = time.Minute
	DefaultLateEvery  = 30 * time.Second
	DefaultQueue      = 64
	DefaultTimeout    = 10 * time.Second
)

// The state bucket's keys the notifier keeps.
const (
	cursorKey = "notify_cursor"
	lateKeyKV = "notify_late"
)

// Notifier follows the event stream and POSTs a Notice to URL for each
// event that makes one (Of) and each lateness change. Set the fields,
// then Prepare (before the engine accepts commands) and Run.
type Notifier struct {
	// URL receives the POSTs (http or https).
	URL string
	// Log is the event log it follows (the engine's, Engine.Log): its
	// reader (Tail, LastSeq) and its state bucket, which keeps the
	// notifier's cursor and late set (always there: eventlog.Ensure
	// creates it with the stream, whether or not the engine writes
	// checkpoints). Required.
	Log *eventlog.Log
	// View reads the live state (the engine's projection); nil: no
	// lateness notices.
	View func(fn func(st *projections.State))
	// Now is the clock lateness is judged at. Default time.Now.
	Now func() time.Time
	// LiveWorkers counts the live workers (serve: its roster); nil, or a
	// negative count, not known. With none live, a late model with no
	// other cause is late for no_worker, as status says.
	LiveWorkers func() int
	// Logger logs each delivery and failure. Default slog.Default().
	Logger *slog.Logger
	// Dashboard is the dashboard's base URL as the receivers reach it,
	// for each notice's link ("": no link).
	Dashboard string
	// Client sends the POSTs. Default: a client with DefaultTimeout.
	Client *http.Client
	// Attempts bounds one round of attempts at a notice; Backoff is the
	// wait after the first failure, doubling up to MaxBackoff (or the
	// endpoint's Retry-After, at most MaxBackoff); Pause the wait before
	// the next round once a round is exhausted.
	Attempts            int
	Backoff, MaxBackoff time.Duration
	Pause               time.Duration
	// LateEvery is how often lateness is judged.
	LateEvery time.Duration
	// Queue bounds the notices read and not yet sent.
	Queue int

	cur     cursor
	late    map[string]string
	metrics *Metrics
}

// Metrics counts what the notifier sent: tidemark_notifications_total
// {kind, outcome} (outcome delivered: acknowledged; refused: a 4xx, not
// sent again) and tidemark_notification_failures_total (attempts that
// failed and will be retried), every series present from the start.
type Metrics struct {
	sent   *prometheus.CounterVec
	failed prometheus.Counter
}

// NewMetrics registers the notifier's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_notifications_total",
			Help: "Notifications (serve --notify-url) acknowledged by the endpoint (outcome delivered) or refused by it for good (outcome refused), by kind."}, []string{"kind", "outcome"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_notification_failures_total",
			Help: "Attempts at a notification that failed (network error, timeout, 408, 425, 429, 5xx) and will be retried."}),
	}
	for _, k := range []string{KindPromotion, KindRollback, KindRestatement, KindWorkFailed, KindLate, KindOnTime} {
		for _, o := range []string{"delivered", "refused"} {
			m.sent.WithLabelValues(k, o)
		}
	}
	for _, c := range []prometheus.Collector{m.sent, m.failed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("notify: metrics: %w", err)
		}
	}
	return m, nil
}

// SetMetrics makes n count what it sends in m.
func (n *Notifier) SetMetrics(m *Metrics) { n.metrics = m }

// Validate checks the settings serve's flags give (a zero Attempts,
// Backoff, … set in code takes its default).
func (n *Notifier) Validate() error {
	u, err := url.Parse(n.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--notify-url %q: want an http:// or https:// URL", n.URL)
	}
	var errs []error
	if n.Dashboard != "" {
		if d, err := url.Parse(n.Dashboard); err != nil || (d.Scheme != "http" && d.Scheme != "https") || d.Host == "" {
			errs = append(errs, fmt.Errorf("--notify-dashboard-url %q: want an http:// or https:// URL", n.Dashboard))
		}
	}
	if n.Attempts < 1 {
		errs = append(errs, fmt.Errorf("--notify-attempts %d: at least 1", n.Attempts))
	}
	if n.Backoff <= 0 {
		errs = append(errs, fmt.Errorf("--notify-backoff %s: more than 0", n.Backoff))
	}
	if n.LateEvery <= 0 {
		errs = append(errs, fmt.Errorf("--notify-late-every %s: more than 0", n.LateEvery))
	}
	return errors.Join(errs...)
}

// cursor is the last event handled: all of message seq (whole), or its
// events up to index (a group message handled in part).
type cursor struct {
	seq   uint64
	index int
	whole bool
}

func (c cursor) String() string {
	if c.whole {
		return strconv.FormatUint(c.seq, 10)
	}
	return strconv.FormatUint(c.seq, 10) + ":" + strconv.Itoa(c.index)
}

func parseCursor(s string) (cursor, error) {
	seq, idx, part := strings.Cut(s, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return cursor{}, err
	}
	if !part {
		return cursor{seq: n, whole: true}, nil
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return cursor{}, fmt.Errorf("index %q", idx)
	}
	return cursor{seq: n, index: i}, nil
}

// Prepare reads the cursor and the late set from the state bucket. On a
// very first start the cursor is the stream's end: history is not news.
// Call it before the engine accepts commands (serve does), so that no
// decision made meanwhile is missed; Run reads both again each time it
// starts.
func (n *Notifier) Prepare(ctx context.Context) error {
	if n.Log == nil {
		return errors.New("notify: the notifier has no event log to follow (Notifier.Log is nil)")
	}
	b := n.Log.Bucket()
	entry, err := b.Get(ctx, cursorKey)
	switch {
	case err == nil:
		c, perr := parseCursor(string(entry.Value()))
		if perr != nil {
			return fmt.Errorf("notify: cursor %q unreadable: %w", entry.Value(), perr)
		}
		n.cur = c
	case errors.Is(err, jetstream.ErrKeyNotFound):
		last, err := n.Log.Reader().LastSeq(ctx)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		n.cur = cursor{seq: last, whole: true}
		if _, err := b.Put(ctx, cursorKey, []byte(n.cur.String())); err != nil {
			return fmt.Errorf("notify: cursor: %w", err)
		}
	default:
		return fmt.Errorf("notify: cursor: %w", err)
	}
	n.late = map[string]string{}
	entry, err = b.Get(ctx, lateKeyKV)
	switch {
	case err == nil:
		if err := json.Unmarshal(entry.Value(), &n.late); err != nil {
			n.logger().Warn("notify: late set unreadable; judging lateness afresh", "err", err)
			n.late = map[string]string{}
		}
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("notify: late set: %w", err)
	}
	return nil
}

// item is what the reader hands the sender: a notice (or none: a mark
// that only moves the cursor) and the event's address.
type item struct {
	notice *Notice
	at     cursor
}

// logger is the notifier's logger (Logger, else slog.Default()).
func (n *Notifier) logger() *slog.Logger {
	if n.Logger == nil {
		return slog.Default()
	}
	return n.Logger
}

// Run sends notices until ctx ends, resuming from the cursor after any
// failure of its reader (after Pause). Each time it starts (serve runs it
// each time its engine becomes the writer, maybe long after Prepare) it
// prepares again: it starts after the cursor and with the late set as
// saved now, where the previous writer stopped, not where they were at
// Prepare.
func (n *Notifier) Run(ctx context.Context) error {
	log := n.logger().With("subsystem", "notify")
	for {
		err := n.runOnce(ctx, log)
		if ctx.Err() != nil {
			return nil
		}
		log.Error("notifier stopped; resuming from its cursor", "err", err, "in", n.pause())
		if !sleep(ctx, n.pause()) {
			return nil
		}
	}
}

func (n *Notifier) runOnce(ctx context.Context, log *slog.Logger) error {
	if err := n.Prepare(ctx); err != nil {
		return err
	}
	start := n.cur
	queue := make(chan item, n.queueLen())
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	tailed := make(chan error, 1)
	from := start.seq + 1
	if !start.whole {
		from = start.seq
	}
	go func() {
		var lastMark time.Time
		tailed <- n.Log.Reader().Tail(tctx, from, func(en eventlog.Entry) error {
			rec := en.Record
			if !start.whole && rec.Seq == start.seq && rec.Index <= start.index {
				return nil
			}
			it := item{at: cursor{seq: rec.Seq, index: rec.Index, whole: rec.Count == 0 || rec.Index == rec.Count-1}}
			if rec.Err != nil {
				log.Warn("event cannot be decoded; it makes no notice", "seq", rec.Seq, "err", rec.Err)
			}
			it.notice = Of(rec, n.Dashboard)
			if it.notice == nil {
				// Marks move the cursor past events that make no notice,
				// at most once a second.
				if !it.at.whole || time.Since(lastMark) < time.Second {
					return nil
				}
				lastMark = time.Now()
			}
			select {
			case queue <- it:
				return nil
			case <-tctx.Done():
				return tctx.Err()
			}
		})
	}()
	var tick <-chan time.Time
	if n.View != nil {
		every := n.LateEvery
		if every <= 0 {
			every = DefaultLateEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
		n.checkLate(ctx, log)
	}
	for {
		select {
		case <-ctx.Done():
			stop()
			<-tailed
			return ctx.Err()
		case err := <-tailed:
			return fmt.Errorf("notify: reading the stream: %w", err)
		case it := <-queue:
			if it.notice != nil {
				if err := n.send(ctx, log, it.notice); err != nil {
					continue // ctx ended
				}
			}
			n.cur = it.at
			// Saved even when ctx ends now (a graceful stop, a handover to
			// another writer): the notice was acknowledged.
			if _, err := n.Log.Bucket().Put(context.WithoutCancel(ctx), cursorKey, []byte(it.at.String())); err != nil {
				// The notice went out; a restart before the next save
				// sends it again, with the same key.
				log.Warn("saving the notify cursor", "err", err, "cursor", it.at.String())
			}
		case <-tick:
			n.checkLate(ctx, log)
		}
	}
}

// checkLate judges every incumbent's lateness now and sends a notice for
// each change from the late set, saving the set after each.
func (n *Notifier) checkLate(ctx context.Context, log *slog.Logger) {
	now := time.Now()
	if n.Now != nil {
		now = n.Now()
	}
	var ls []Lateness
	var seq uint64
	noWorker := n.LiveWorkers != nil && n.LiveWorkers() == 0
	n.View(func(st *projections.State) { ls, seq = Late(st, now, noWorker), st.Seq })
	seen := map[string]bool{}
	changed := false
	for _, l := range ls {
		k := lateKey(l.Env, l.Model)
		seen[k] = true
		_, was := n.late[k]
		if l.Late == was {
			continue
		}
		if err := n.send(ctx, log, latenessNotice(l, seq, now, n.Dashboard)); err != nil {
			break // ctx ended
		}
		if l.Late {
			n.late[k] = l.Snapshot
		} else {
			delete(n.late, k)
		}
		changed = true
	}
	for k := range n.late {
		if !seen[k] {
			delete(n.late, k) // its env or model is gone: nothing to say
			changed = true
		}
	}
	if !changed {
		return
	}
	b, _ := json.Marshal(n.late)
	if _, err := n.Log.Bucket().Put(context.WithoutCancel(ctx), lateKeyKV, b); err != nil {
		log.Warn("saving the late set", "err", err)
	}
}

// send POSTs notice until the endpoint acknowledges it (2xx) or refuses it
// for good (any other 4xx: logged, not sent again); it returns an error
// only when ctx ends. Failures are retried Attempts times with backoff;
// then the round is logged as an error and, after Pause, another begins.
func (n *Notifier) send(ctx context.Context, log *slog.Logger, notice *Notice) error {
	body, err := json.Marshal(notice)
	if err != nil {
		log.Error("notice cannot be encoded; skipped", "key", notice.Key, "err", err)
		return nil
	}
	attempts := n.Attempts
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	maxBackoff := n.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	for round := 1; ; round++ {
		backoff := n.Backoff
		if backoff <= 0 {
			backoff = DefaultBackoff
		}
		var last error
		for attempt := 1; attempt <= attempts; attempt++ {
			retryable, after, err := n.post(ctx, notice.Key, body)
			if err == nil {
				n.count(notice.Kind, "delivered")
				log.Info("notification delivered", "kind", notice.Kind, "key", notice.Key, "seq", notice.Seq, "attempt", attempt, "round", round)
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !retryable {
				n.count(notice.Kind, "refused")
				log.Error("notification refused by the endpoint; it is not sent again", "kind", notice.Kind, "key", notice.Key, "seq", notice.Seq, "err", err)
				return nil
			}
			last = err
			if n.metrics != nil {
				n.metrics.failed.Inc()
			}
			if attempt == attempts {
				break
			}
			wait := min(max(backoff, after), maxBackoff)
			log.Warn("notification not delivered; retrying", "kind", notice.Kind, "key", notice.Key, "attempt", attempt, "err", err, "in", wait)
			if !sleep(ctx, wait) {
				return ctx.Err()
			}
			backoff = min(2*backoff, maxBackoff)
		}
		log.Error("notification endpoint failing: attempts exhausted; the notice is kept and sent again (later ones wait behind it, none is dropped)",
			"kind", notice.Kind, "key", notice.Key, "seq", notice.Seq, "attempts", attempts, "round", round, "err", last, "in", n.pause())
		if !sleep(ctx, n.pause()) {
			return ctx.Err()
		}
	}
}

// post sends one attempt: nil on a 2xx; else whether it may succeed if
// sent again, and the endpoint's Retry-After.
func (n *Notifier) post(ctx context.Context, key string, body []byte) (retryable bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("User-Agent", "tidemark-notify")
	client := n.Client
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return true, 0, redact(err)
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, 0, nil
	}
	if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
		after = time.Duration(s) * time.Second
	}
	err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(snippet)))
	switch c := resp.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusTooEarly, c == http.StatusTooManyRequests, c >= 500:
		return true, after, err
	}
	return false, after, err
}

// redact is err without the URL's path and query (a webhook's are often
// its secret) nor its user info: the endpoint named by scheme and host.
func redact(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	where := "the endpoint"
	if u, perr := url.Parse(ue.URL); perr == nil {
		where = u.Scheme + "://" + u.Host
	}
	return fmt.Errorf("%s %s: %w", ue.Op, where, ue.Err)
}

func (n *Notifier) count(kind, outcome string) {
	if n.metrics != nil {
		n.metrics.sent.WithLabelValues(kind, outcome).Inc()
	}
}

func (n *Notifier) pause() time.Duration {
	if n.Pause <= 0 {
		return DefaultPause
	}
	return n.Pause
}

func (n *Notifier) queueLen() int {
	if n.Queue <= 0 {
		return DefaultQueue
	}
	return n.Queue
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
