package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
)

// ErrConflict means an append's expected sequence no longer matched: some
// other writer changed an aggregate the decision read. Re-read and re-decide.
// Both JetStream codes for it (10071, and 10164 on replicated streams) map
// here.
var ErrConflict = errors.New("engine: concurrent change (expected sequence mismatch)")

// ErrAmbiguous means an append may or may not have been stored (the ack was
// lost). Re-read the tail before deciding again.
var ErrAmbiguous = errors.New("engine: append outcome unknown")

// ErrStopped is returned by an engine that is closing or closed.
var ErrStopped = errors.New("engine: stopped")

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

// BatchHeader marks each event of a multi-event command with its place in
// the command's atomic batch, "i/n" (1-based); single events carry none.
// Readers that group a command's events (the work publisher) use it.
const BatchHeader = "Tidemark-Batch"

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
// or "i:" for one of the engine's own (commands.IsInternalID), then the hex
// SHA-256 of the kind, a zero byte and the exact id. Ids that differ in
// any byte, and one id used by two kinds, never share a message id, and no
// client id shares one with an engine command.
func MsgID(kind, id string) string {
	ns := "c:"
	if commands.IsInternalID(id) {
		ns = "i:"
	}
	sum := sha256.Sum256([]byte(kind + "\x00" + id))
	return ns + hex.EncodeToString(sum[:])
}

// appendEvents stores the events of command kind with id under exp: one
// event as one conditional publish, several as one atomic batch, never
// half. digest is the command's (commands.Digest, carried by its events).
func (e *Engine) appendEvents(ctx context.Context, kind, id, digest string, evs []events.Event, exp events.Expect) (uint64, error) {
	msgs, err := commandMsgs(MsgID(kind, id), evs, exp)
	if err != nil {
		return 0, err
	}
	if len(msgs) > 1 {
		// A batch whose message ids are stored already fails as a whole
		// (mapErr: a conflict, so the caller re-reads).
		ack, err := jetstreamext.PublishMsgBatch(ctx, e.js, msgs)
		if err != nil {
			return 0, mapErr(err)
		}
		return ack.Sequence, nil
	}
	ack, err := e.js.PublishMsg(ctx, msgs[0])
	if err != nil {
		return 0, mapErr(err)
	}
	if ack.Duplicate {
		// The stream stored nothing: it says a message with this id is
		// stored at ack.Sequence. That is success only if that message is
		// this very command.
		if err := e.sameCommand(ctx, ack.Sequence, id, digest); err != nil {
			return 0, err
		}
	}
	return ack.Sequence, nil
}

// sameCommand checks that the event stored at seq was caused by command
// id with digest; otherwise it returns an ErrConflict (re-read and decide
// again: nothing of this command was stored).
func (e *Engine) sameCommand(ctx context.Context, seq uint64, id, digest string) error {
	raw, err := e.stream.GetMsg(ctx, seq)
	if err != nil {
		return fmt.Errorf("%w: a duplicate of seq %d, which cannot be read: %v", ErrAmbiguous, seq, err)
	}
	ev, err := events.Decode(raw.Data)
	if err != nil || ev.Causation != id || ev.Digest != digest {
		return fmt.Errorf("%w: the stream called the append a duplicate of seq %d, which is not this command: nothing was stored", ErrConflict, seq)
	}
	return nil
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
		if len(evs) > 1 {
			id = msgID + "#" + strconv.Itoa(i)
		}
		m.Header.Set(jetstream.MsgIDHeader, id)
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
			return nil, fmt.Errorf("engine: expectation on %s, which the append does not write", s)
		}
	}
	return msgs, nil
}
