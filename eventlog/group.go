package eventlog

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
)

// Group messages. Under SyncAlways every stored message costs an fsync,
// and nats-server 2.15.3 coalesces the fsyncs of several messages only for
// an atomic batch, which on a single-replica file store costs milliseconds
// (docs/performance.md). So a group commit can store the events of many
// commands as ONE message on GroupSubject: one fsync for the group. The
// body is the events' encodings in order (groupBody); the message is
// conditional on the stream's last sequence only (AppendGroup), which
// implies every per-subject condition its commands' decisions carried.
//
// Every reader expands a group message into its events, each with its own
// address: (Seq, Index) in events.Record, Count events at Seq. Stored
// subjects no longer name every event's aggregate, so per-subject
// conditions (events.Expect.Subjects) are only right on a stream that
// holds no group message: a writer that finds one (projections.State
// Groups) appends under the stream's last sequence instead.

// GroupSubject is the subject group messages are stored on.
const GroupSubject = events.SubjectPrefix + "group"

// GroupHeader is set on every group message to the number of events it
// carries (informative: readers go by the body).
const GroupHeader = "Tidemark-Group"

// MaxGroupEvents bounds the events of one group message.
const MaxGroupEvents = 1024

// ErrGroup marks a group message whose body is not a well-formed group.
var ErrGroup = errors.New("eventlog: malformed group message")

// groupBody encodes evs as a group message body: the uvarint count, then
// each event as a uvarint length and its encoding (events.Encode).
func groupBody(evs []events.Event) ([]byte, error) {
	if len(evs) == 0 || len(evs) > MaxGroupEvents {
		return nil, fmt.Errorf("eventlog: a group of %d events: want 1..%d", len(evs), MaxGroupEvents)
	}
	out := binary.AppendUvarint(make([]byte, 0, 256*len(evs)), uint64(len(evs)))
	var scratch []byte // one event's encoding
	for _, ev := range evs {
		if ev.Payload != nil && ev.Payload.Subject() == GroupSubject {
			return nil, fmt.Errorf("eventlog: event %s belongs on the group subject", ev.ID)
		}
		var err error
		if scratch, err = events.AppendEncode(scratch[:0], ev); err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(scratch)))
		out = append(out, scratch...)
	}
	return out, nil
}

// splitGroup returns the encodings a group body carries. It refuses a
// count or a length longer than the bytes that follow, and trailing bytes.
func splitGroup(body []byte) ([][]byte, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n == 0 || n > MaxGroupEvents || n > uint64(len(body)-k) {
		return nil, fmt.Errorf("%w: bad event count", ErrGroup)
	}
	body = body[k:]
	parts := make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(body)
		if k <= 0 || l > uint64(len(body)-k) {
			return nil, fmt.Errorf("%w: event %d: bad length", ErrGroup, i)
		}
		parts = append(parts, body[k:k+int(l)])
		body = body[k+int(l):]
	}
	if len(body) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last event", ErrGroup, len(body))
	}
	return parts, nil
}

// Expand turns the message stored at seq on subject into records: one for
// a message of its own (events.DecodeAt), one per event for a group
// message (Index, Count set; Subject the event's own), or one record with
// Err for a group body that is malformed. An event in a group that is not
// a tidemark event is a record with Err on GroupSubject.
func Expand(seq uint64, subject string, data []byte) []events.Record {
	if subject != GroupSubject {
		ev, err := events.DecodeAt(subject, data)
		return []events.Record{{Seq: seq, Subject: subject, Event: ev, Err: err}}
	}
	parts, err := splitGroup(data)
	if err != nil {
		return []events.Record{{Seq: seq, Subject: subject, Err: err}}
	}
	recs := make([]events.Record, len(parts))
	for i, b := range parts {
		r := events.Record{Seq: seq, Subject: GroupSubject, Index: i, Count: len(parts)}
		r.Event, r.Err = events.Decode(b)
		if r.Err == nil {
			r.Subject = r.Event.Payload.Subject()
			if r.Subject == GroupSubject {
				r.Err = fmt.Errorf("%w: a group in a group", ErrGroup)
			}
		}
		recs[i] = r
	}
	return recs
}

// GroupCondition is what a group message is stored under.
type GroupCondition struct {
	// LastSeq is the stream's last sequence the append requires.
	LastSeq uint64
}

// groupMsg is the group message storing evs under cond.
func groupMsg(evs []events.Event, cond GroupCondition) (*nats.Msg, error) {
	body, err := groupBody(evs)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(GroupSubject)
	m.Data = body
	m.Header.Set(GroupHeader, strconv.Itoa(len(evs)))
	m.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(cond.LastSeq, 10))
	return m, nil
}

// AppendGroup stores evs, the events of one or more commands, as one group
// message under cond (the stream's last sequence as the view every one of
// their decisions was made on saw it). All are stored, at one sequence,
// which it returns, or none: ErrConflict when the condition failed,
// ErrAmbiguous when the ack was lost (re-read: each event carries its
// command's id). A retry is stopped by its condition.
func (l *Log) AppendGroup(ctx context.Context, evs []events.Event, cond GroupCondition) (uint64, error) {
	m, err := groupMsg(evs, cond)
	if err != nil {
		return 0, err
	}
	ack, err := l.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, mapErr(err)
	}
	return ack.Sequence, nil
}

// PublishGroup is AppendGroup without waiting for the ack: AwaitGroup
// waits for it, given the token PublishGroup returns. The ack comes back
// on an inbox of the log's own whose channel the connection's reader
// goroutine fills itself. jetstream's asynchronous publish hands each ack
// from that reader to a callback goroutine, which passes it on to the
// future's channel: one goroutine wake-up more between the server's ack
// and the one waiting for it, on every group the engine's committer
// stores (docs/performance.md). PublishGroup and AwaitGroup are for one
// goroutine at a time; Close unsubscribes the inbox.
func (l *Log) PublishGroup(evs []events.Event, cond GroupCondition) (token string, err error) {
	if l.closed {
		return "", ErrClosed
	}
	m, err := groupMsg(evs, cond)
	if err != nil {
		return "", err
	}
	if l.acks == nil {
		nc := l.js.Conn()
		a := &groupAcks{c: make(chan *nats.Msg, 64), prefix: nc.NewInbox() + "."}
		if a.sub, err = nc.ChanSubscribe(a.prefix+"*", a.c); err != nil {
			return "", fmt.Errorf("eventlog: subscribe the group acks' inbox: %w", err)
		}
		l.acks = a
	}
	l.acks.n++
	m.Reply = l.acks.prefix + strconv.FormatUint(l.acks.n, 36)
	if err := l.js.Conn().PublishMsg(m); err != nil {
		return "", mapErr(err)
	}
	return m.Reply, nil
}

// groupAcks is the inbox PublishGroup's acks come back on.
type groupAcks struct {
	c      chan *nats.Msg // filled by the connection's reader; one a full channel would block is dropped (a lost ack)
	sub    *nats.Subscription
	prefix string
	n      uint64 // tokens handed out
}

// AwaitGroup waits for the ack of the group message PublishGroup sent
// with token, and returns the sequence it was stored at; or ErrConflict
// (its condition failed: nothing was stored), or ErrAmbiguous (no answer
// before ctx ended, or no stream answered: re-read). Acks of earlier
// groups whose wait ended are skipped.
func (l *Log) AwaitGroup(ctx context.Context, token string) (uint64, error) {
	if l.acks == nil {
		return 0, fmt.Errorf("eventlog: no group was published with %q", token)
	}
	for {
		select {
		case m := <-l.acks.c:
			if m.Subject == token {
				return groupAck(m)
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: no ack of the group message: %v", ErrAmbiguous, ctx.Err())
		}
	}
}

// groupAck reads the server's reply to a group message.
func groupAck(m *nats.Msg) (uint64, error) {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		return 0, mapErr(nats.ErrNoResponders)
	}
	var r struct {
		Error     *jetstream.APIError `json:"error"`
		Stream    string              `json:"stream"`
		Seq       uint64              `json:"seq"`
		Duplicate bool                `json:"duplicate"`
	}
	switch err := json.Unmarshal(m.Data, &r); {
	case err != nil:
		return 0, fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, err)
	case r.Error != nil:
		return 0, mapErr(r.Error)
	case r.Stream == "" || r.Seq == 0:
		return 0, jetstream.ErrInvalidJSAck
	case r.Duplicate: // a group message carries no message id: never stored twice
		return 0, fmt.Errorf("%w: the server called group message %d a duplicate", ErrConflict, r.Seq)
	}
	return r.Seq, nil
}

// Close unsubscribes the inbox of PublishGroup's acks, if there is one
// (a nil Log: nothing); PublishGroup then refuses with ErrClosed. The
// log's connection stays open, and so do its other appends.
func (l *Log) Close() {
	if l == nil {
		return
	}
	l.closed = true
	if l.acks != nil {
		_ = l.acks.sub.Unsubscribe()
		l.acks = nil
	}
}

// MapErr maps a publish error (an AppendAsync future's) to ErrConflict
// or ErrAmbiguous where it is one.
func MapErr(err error) error { return mapErr(err) }

// subjectMatch reports whether subject matches the NATS filter (tokens,
// "*" for one, ">" for the rest).
func subjectMatch(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, t := range f {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) || (t != "*" && t != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// matchAny reports whether subject matches one of filters (none: all).
func matchAny(filters []string, subject string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if subjectMatch(f, subject) {
			return true
		}
	}
	return false
}
