package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"github.com/tidemark/tidemark/events"
)

// ErrConflict means an append's expected sequence no longer matched: some
// other writer changed an aggregate the decision read. Re-read and re-decide.
// Both JetStream codes for it (10071, and 10164 on replicated streams) map
// here.
var ErrConflict = errors.New("eventlog: concurrent change (expected sequence mismatch)")

// ErrAmbiguous means an append may or may not have been stored (the ack was
// lost). Re-read the tail before deciding again.
var ErrAmbiguous = errors.New("eventlog: append outcome unknown")

// ErrClosed refuses a group publish on a log after Close: its acks'
// inbox is gone, so the group could be stored with nobody to learn it.
var ErrClosed = errors.New("eventlog: the log is closed")

// ErrUnfenced refuses an append with neither a message id nor a
// whole-stream condition (AppendAsync): nothing would stop a retry from
// storing it twice.
var ErrUnfenced = errors.New("eventlog: an append without a message id needs a whole-stream condition (events.Expect.LastSeq)")

// EventDuplicateWindow is the event stream's Nats-Msg-Id deduplication
// window. It is short on purpose. A retried append cannot be stored twice
// anyway: every append is conditional on the last sequence of each subject
// it writes (or of the whole stream), so a retry after the first landed
// fails its condition, and the engine re-reads and finds the command id
// applied. The window only costs: the server keeps an id map for it and,
// on every start, re-reads every message stored within it (at 1,000,000
// events appended just before a restart, a 5-minute window made the
// restart scan them all: docs/performance.md).
const EventDuplicateWindow = 2 * time.Second

// BucketName is the JetStream KV bucket beside the stream: projection
// checkpoints (package checkpoint) and the work publisher's cursor
// (package work).
const BucketName = "TIDEMARK_CHECKPOINTS"

// BatchHeader marks each event of a multi-event command with its place in
// the command's atomic batch, "i/n" (1-based); single events carry none.
// Readers that group a command's events (the work publisher) use it.
const BatchHeader = "Tidemark-Batch"

// AppendTimeout bounds one append (and the re-read after a lost ack): a
// publish the stream does not answer (a leader election on a cluster) is
// treated as ambiguous and retried with the same message ids.
const AppendTimeout = 5 * time.Second

// StreamWait bounds how long Ensure waits for a clustered stream to become
// available (its peers to join and elect a leader).
const StreamWait = 2 * time.Minute

// StreamConfig is the configuration of the event stream.
func StreamConfig(replicas int, memory bool) jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	storage := jetstream.FileStorage
	if memory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:               events.StreamName,
		Description:        "tidemark events: every plan build, completion, scheduler advance and promotion decision",
		Subjects:           []string{events.SubjectAll},
		Storage:            storage,
		Replicas:           replicas,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardNew,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxAge:             0,
		MaxMsgsPerSubject:  -1,
		Duplicates:         EventDuplicateWindow,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowAtomicPublish: true,
		// Readers (replay, audit, the auditor) use batched direct gets: no
		// consumer, no server-side state per reader.
		AllowDirect: true,
	}
}

// BucketConfig is the configuration of the state bucket.
func BucketConfig(replicas int, memory bool) jetstream.KeyValueConfig {
	if replicas < 1 {
		replicas = 1
	}
	storage := jetstream.FileStorage
	if memory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.KeyValueConfig{
		Bucket: BucketName, Description: "tidemark projection checkpoints (state + last sequence)",
		History: 1, Storage: storage, Replicas: replicas, MaxValueSize: -1,
	}
}

// Config configures the log a writer ensures.
type Config struct {
	// Replicas is the stream's and the bucket's replica count (1 unless
	// clustered).
	Replicas int
	// Memory keeps both in memory (tests and benchmarks only: nothing
	// survives a restart).
	Memory bool
	// Clustered says the server is a cluster member (even with one
	// replica): JetStream calls are retried until a meta leader answers.
	Clustered bool
	// Wait bounds those retries while a cluster forms. Default StreamWait.
	Wait time.Duration
	// Logger receives the log's messages. Default slog.Default().
	Logger *slog.Logger
}

// Log is the writable event log: the stream and the state bucket.
type Log struct {
	cfg    Config
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	r      *Reader
	acks   *groupAcks // PublishGroup's inbox (nil until it first publishes)
	closed bool       // Close was called: PublishGroup refuses
}

// Ensure creates or updates the event stream and the state bucket and
// returns the log over them. On a cluster it waits (up to cfg.Wait) for
// enough peers to join.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Log, error) {
	if cfg.Wait <= 0 {
		cfg.Wait = StreamWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Log{cfg: cfg, js: js}
	var err error
	if l.stream, err = retry(ctx, cfg, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, StreamConfig(cfg.Replicas, cfg.Memory))
	}); err != nil {
		return nil, fmt.Errorf("eventlog: stream %s: %w", events.StreamName, err)
	}
	if l.kv, err = retry(ctx, cfg, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, BucketConfig(cfg.Replicas, cfg.Memory))
	}); err != nil {
		return nil, fmt.Errorf("eventlog: bucket %s: %w", BucketName, err)
	}
	l.r = &Reader{js: js, stream: l.stream, log: cfg.Logger}
	return l, nil
}

// Reader is the log's reading side.
func (l *Log) Reader() *Reader { return l.r }

// Bucket is the state bucket (BucketName): projection checkpoints and the
// cursors of the components that follow the stream (the work publisher,
// the notifier). Ensure creates it, so it is always there.
func (l *Log) Bucket() jetstream.KeyValue { return l.kv }

// JetStream is the handle the log was ensured on; its Conn is the
// writer's connection. The components beside the writer provision their
// own streams and buckets with it (the work stream, the lease bucket),
// under Retry and following Config's replicas and storage.
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// Config is the configuration the log was ensured with (defaults filled
// in): Replicas and Memory are what the streams and buckets provisioned
// beside it follow.
func (l *Log) Config() Config { return l.cfg }

// Retry runs a JetStream API call the way Ensure provisions the stream: on
// a cluster, attempts repeat for up to Config.Wait until enough peers have
// joined; elsewhere one attempt is made.
func (l *Log) Retry(ctx context.Context, call func(context.Context) error) error {
	_, err := retry(ctx, l.cfg, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// retry runs a JetStream API call. On a cluster the first calls fail or
// go unanswered until enough peers have joined and a meta leader is
// elected: each attempt is bounded, and attempts repeat for up to
// cfg.Wait. Elsewhere one attempt is made.
func retry[T any](ctx context.Context, cfg Config, call func(context.Context) (T, error)) (T, error) {
	wait := cfg.Wait
	if wait <= 0 {
		wait = StreamWait
	}
	deadline := time.Now().Add(wait)
	backoff := 100 * time.Millisecond
	clustered := cfg.Clustered || cfg.Replicas > 1
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := call(actx)
		cancel()
		if err == nil || !clustered || time.Now().After(deadline) || ctx.Err() != nil {
			return v, err
		}
		if cfg.Logger != nil {
			cfg.Logger.Info("waiting for the cluster", "err", err)
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// Append stores one command's events under exp: one event as one
// conditional publish, several as one atomic batch, never half. msgID is
// the command's message id (MsgID); the events carry its id (Causation)
// and digest, which tell a duplicate of this command from another. It
// returns the sequence of the last event stored; errors.Is tells
// ErrConflict (the condition failed: re-read to LastSeq and decide again)
// and ErrAmbiguous (the ack was lost: the same).
func (l *Log) Append(ctx context.Context, msgID string, evs []events.Event, exp events.Expect) (uint64, error) {
	if len(evs) == 0 {
		return 0, errors.New("eventlog: append of no events")
	}
	msgs, err := commandMsgs(msgID, evs, exp)
	if err != nil {
		return 0, err
	}
	if len(msgs) > 1 {
		// A batch whose message ids are stored already fails as a whole
		// (mapErr: a conflict, so the caller re-reads).
		ack, err := jetstreamext.PublishMsgBatch(ctx, l.js, msgs)
		if err != nil {
			return 0, mapErr(err)
		}
		return ack.Sequence, nil
	}
	ack, err := l.js.PublishMsg(ctx, msgs[0])
	if err != nil {
		return 0, mapErr(err)
	}
	if ack.Duplicate {
		// The stream stored nothing: it says a message with this id is
		// stored at ack.Sequence. That is success only if that message is
		// this very command.
		if err := l.sameCommand(ctx, ack.Sequence, evs[0].Causation, evs[0].Digest); err != nil {
			return 0, err
		}
	}
	return ack.Sequence, nil
}

// AppendAsync publishes a command's one event under exp, with message id
// msgID (MsgID), without waiting for its acknowledgement: the future carries it. A
// duplicate ack stored nothing (the stream holds a message with this id);
// the caller must not take it for success without checking (Append does).
//
// An empty msgID publishes without one (the stream keeps no dedupe entry
// for it, which costs the server on every append): only under a
// whole-stream condition (exp.LastSeq), which alone stops a second copy
// (the first moved the stream past it). Without one it is refused with
// ErrUnfenced.
func (l *Log) AppendAsync(msgID string, ev events.Event, exp events.Expect) (jetstream.PubAckFuture, error) {
	if msgID == "" && exp.LastSeq == nil {
		return nil, ErrUnfenced
	}
	msgs, err := commandMsgs(msgID, []events.Event{ev}, exp)
	if err != nil {
		return nil, err
	}
	return l.js.PublishMsgAsync(msgs[0])
}

// sameCommand checks that the event stored at seq was caused by command
// id with digest; otherwise it returns an ErrConflict (re-read and decide
// again: nothing of this command was stored).
func (l *Log) sameCommand(ctx context.Context, seq uint64, id, digest string) error {
	raw, err := l.stream.GetMsg(ctx, seq)
	if err != nil {
		return fmt.Errorf("%w: a duplicate of seq %d, which cannot be read: %v", ErrAmbiguous, seq, err)
	}
	ev, err := events.Decode(raw.Data)
	if err != nil || ev.Causation != id || ev.Digest != digest {
		return fmt.Errorf("%w: the stream called the append a duplicate of seq %d, which is not this command: nothing was stored", ErrConflict, seq)
	}
	return nil
}

// mapErr turns JetStream publish errors into ErrConflict / ErrAmbiguous.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	code := jetstream.ErrorCode(0)
	var apiErr *jetstream.APIError
	var jsErr jetstream.JetStreamError
	switch {
	case errors.As(err, &apiErr):
		code = apiErr.ErrorCode
	case errors.As(err, &jsErr) && jsErr.APIError() != nil:
		code = jsErr.APIError().ErrorCode
	}
	switch code {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		return fmt.Errorf("%w: %v", ErrConflict, err)
	case jetstreamext.JSErrCodeBatchPublishDuplicateMsgID:
		// A retried batch whose ids are already stored: treat like a
		// conflict, so the caller re-reads and finds the command applied.
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return fmt.Errorf("%w: %v", ErrAmbiguous, err)
	}
	return err
}

// MsgID is the Nats-Msg-Id of the event of command kind with id (the
// i-th of several: MsgID + "#<i>"): a namespace, "c:" for a client's id
// or "i:" for one of the engine's own (internal: commands.IsInternalID),
// then the hex SHA-256 of the kind, a zero byte
// and the exact id. Ids that differ in any byte, and one id used by two
// kinds, never share a message id, and no client id shares one with an
// engine command.
func MsgID(kind, id string, internal bool) string {
	ns := "c:"
	if internal {
		ns = "i:"
	}
	sum := sha256.Sum256([]byte(kind + "\x00" + id))
	return ns + hex.EncodeToString(sum[:])
}

// commandMsgs turns one command's events into the messages that store
// them under exp. Message ids derive from msgID (MsgID), so the stream
// also deduplicates a retry that comes within EventDuplicateWindow.
func commandMsgs(msgID string, evs []events.Event, exp events.Expect) ([]*nats.Msg, error) {
	msgs := make([]*nats.Msg, len(evs))
	checked := map[string]bool{}
	for i, ev := range evs {
		b, err := events.Encode(ev)
		if err != nil {
			return nil, err
		}
		subj := ev.Payload.Subject()
		m := nats.NewMsg(subj)
		m.Data = b
		id := msgID
		if len(evs) > 1 && msgID != "" {
			id = msgID + "#" + strconv.Itoa(i)
		}
		if id != "" {
			m.Header.Set(jetstream.MsgIDHeader, id)
		}
		if len(evs) > 1 {
			m.Header.Set(BatchHeader, fmt.Sprintf("%d/%d", i+1, len(evs)))
		}
		if i == 0 && exp.LastSeq != nil {
			m.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(*exp.LastSeq, 10))
		}
		if seq, ok := exp.Subjects[subj]; ok && !checked[subj] {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
			checked[subj] = true
		}
		msgs[i] = m
	}
	// Every expectation must sit on a message of its own subject.
	for s := range exp.Subjects {
		if !checked[s] {
			return nil, fmt.Errorf("eventlog: expectation on %s, which the append does not write", s)
		}
	}
	return msgs, nil
}
