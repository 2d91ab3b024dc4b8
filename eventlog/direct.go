package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reading without a consumer. A reader of the event stream creates no
// consumer: it asks for the messages in batches of direct gets
// ($JS.API.DIRECT.GET.<stream> with a start sequence and a batch size; the
// stream allows direct gets), so it holds no state on the server, and a
// user that may only read (the auditor of docs/auth.conf) needs no
// permission to create consumers at all. Servers or streams without batched
// direct gets fall back to an ordered consumer.

// directBatch is how many messages one direct get asks for.
const directBatch = 1024

// errNoDirect: the server or stream does not serve batched direct gets.
var errNoDirect = errors.New("eventlog: batched direct get unavailable")

// notServed is readDirect's error when nothing is served from seq on
// though the stream claims to hold it, for longer than the patience given:
// a lagging replica, or a message the store lost. The caller asks the
// stream leader for each remaining sequence.
type notServed struct{ seq uint64 }

func (e notServed) Error() string {
	return fmt.Sprintf("eventlog: sequence %d is not served by direct gets", e.seq)
}

// readDirect calls visit with every message of stream from sequence from
// through upTo, in order, until visit says stop. Sequences the stream does
// not hold are skipped; when nothing at all is served from a sequence on
// for patience, it returns notServed.
func readDirect(ctx context.Context, js jetstream.JetStream, stream string, from, upTo uint64, patience time.Duration, visit func(seq uint64, subject string, data []byte) (stop bool)) error {
	nc := js.Conn()
	subject := apiPrefix(js.Options()) + "DIRECT.GET." + stream
	next := from
	var stalled time.Time
	for next <= upTo {
		b, err := directGet(ctx, nc, subject, next, upTo, visit)
		switch {
		case err != nil:
			return err
		case b.done:
			return nil
		case b.last >= next:
			next, stalled = b.last+1, time.Time{}
			continue
		}
		// Nothing served at or after next, though the stream holds it:
		// a lagging replica answered; ask again, for a while.
		if stalled.IsZero() {
			stalled = time.Now()
		} else if time.Since(stalled) > patience {
			return notServed{next}
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// batchResult is what one direct get brought: the last sequence handed to
// visit (0: none), and done when visit stopped or a message past upTo came
// (the read is complete).
type batchResult struct {
	last uint64
	done bool
}

// directGet asks for up to directBatch messages from seq on and hands those
// through upTo to visit.
func directGet(ctx context.Context, nc *nats.Conn, subject string, seq, upTo uint64, visit func(uint64, string, []byte) bool) (batchResult, error) {
	var b batchResult
	batch := uint64(directBatch)
	if upTo-seq+1 < batch {
		batch = upTo - seq + 1
	}
	req, err := json.Marshal(struct {
		Seq   uint64 `json:"seq"`
		Batch int    `json:"batch"`
	}{seq, int(batch)})
	if err != nil {
		return b, err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return b, fmt.Errorf("eventlog: direct get: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, req); err != nil {
		return b, fmt.Errorf("eventlog: direct get: %w", err)
	}
	for {
		// Each message of a batch follows the previous one closely; a
		// silent server is a lost request or a dead one.
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return b, ctx.Err()
			}
			return b, fmt.Errorf("eventlog: direct get from seq %d: %w", seq, err)
		}
		// A status has no sequence (a stored message always has one, and
		// the server strips any status line from what it stores).
		if msg.Header.Get(jetstream.SequenceHeader) == "" {
			switch status := msg.Header.Get("Status"); status {
			case "204", "404": // end of batch; nothing at or after seq
				return b, nil
			case "503", "": // no responders, or not a direct get answer
				return b, errNoDirect
			default:
				return b, fmt.Errorf("eventlog: direct get from seq %d: status %s %s", seq, status, msg.Header.Get("Description"))
			}
		}
		if msg.Header.Get("Nats-Num-Pending") == "" {
			return b, errNoDirect // a server without batches answers one message, unmarked
		}
		s, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil || s < seq || s <= b.last {
			return b, fmt.Errorf("eventlog: direct get from seq %d: bad sequence %q", seq, msg.Header.Get(jetstream.SequenceHeader))
		}
		if s > upTo {
			b.done = true // past the read (upTo itself is not stored)
			return b, nil
		}
		b.last = s
		if visit(s, msg.Header.Get(jetstream.SubjectHeader), msg.Data) {
			b.done = true
			return b, nil
		}
	}
}

// apiPrefix is the JetStream API prefix of js, ending in '.'.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return "$JS.API."
}
