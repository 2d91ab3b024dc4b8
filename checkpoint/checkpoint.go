// Package checkpoint stores and loads snapshots of the live projection in
// the log's state bucket (eventlog.BucketName, key Key), so a restart
// folds only the events after one: Encode and Decode are the value's
// format, Load reads one back and checks it against the stream, and a
// Keeper writes one every Every folded events.
//
// Invariants. A checkpoint is used only when every check passes: its
// Format and event schema are this build's, its header's fingerprint and
// its state's hash match, and the event stored at its Seq has the id it
// names (a stream deleted and recreated does not match); anything else is
// a reason to rebuild from the stream, never a failure. A projection that
// failed (a damaged store) is not checkpointed: the stored one keeps
// showing how far the stream once reached (StoredSeq).
//
// Importers: engine, cmd/tidemark (store.go: StoredSeq) and tests.
// It imports live, eventlog, projections and events.
package checkpoint

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Key is the one key checkpoints are written under in the state bucket
// (eventlog.BucketName).
const Key = "projections"

// Format is the layout of a checkpoint. Bump it whenever the
// projection state changes shape or meaning: older checkpoints are then
// ignored and the state is rebuilt from the stream.
const Format = 12

// DefaultEvery is how many newly folded events make a Keeper write a
// checkpoint.
const DefaultEvery = 10_000

// Header is the first line of a checkpoint value; the gzipped JSON state
// follows it.
type Header struct {
	Format int `json:"format"`
	Schema int `json:"schema"`
	// Seq is the last stream sequence folded into the state.
	Seq uint64 `json:"seq"`
	// LastEventID is the id of the event at Seq: a checkpoint from another
	// stream (one deleted and recreated) does not match it.
	LastEventID string `json:"last_event_id"`
	// StateSHA256 is the hash of the gzipped state that follows.
	StateSHA256 string `json:"state_sha256"`
	// Fingerprint hashes everything above; it must match.
	Fingerprint string `json:"fingerprint"`
}

func (h Header) fingerprint() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "tidemark-checkpoint|%d|%d|%d|%s|%s", h.Format, h.Schema, h.Seq, h.LastEventID, h.StateSHA256))
	return hex.EncodeToString(sum[:])
}

// Encode serialises st; lastID is the id of the event at st.Seq.
func Encode(st *projections.State, lastID string) ([]byte, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body.Bytes())
	h := Header{Format: Format, Schema: events.SchemaVersion, Seq: st.Seq, LastEventID: lastID, StateSHA256: hex.EncodeToString(sum[:])}
	h.Fingerprint = h.fingerprint()
	head, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return append(append(head, '\n'), body.Bytes()...), nil
}

// Decode parses and verifies a checkpoint value. Any mismatch is an error:
// the caller rebuilds instead of trusting it.
func Decode(b []byte) (Header, *projections.State, error) {
	var h Header
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return h, nil, errors.New("no header line")
	}
	if err := json.Unmarshal(b[:i], &h); err != nil {
		return h, nil, fmt.Errorf("header: %w", err)
	}
	switch {
	case h.Format != Format:
		return h, nil, fmt.Errorf("format %d, this build reads %d", h.Format, Format)
	case h.Schema != events.SchemaVersion:
		return h, nil, fmt.Errorf("event schema %d, this build writes %d", h.Schema, events.SchemaVersion)
	case h.Fingerprint != h.fingerprint():
		return h, nil, errors.New("fingerprint does not match the header")
	}
	body := b[i+1:]
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != h.StateSHA256 {
		return h, nil, errors.New("state does not match its hash")
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return h, nil, fmt.Errorf("state: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return h, nil, fmt.Errorf("state: %w", err)
	}
	st := projections.New()
	if err := json.Unmarshal(raw, st); err != nil {
		return h, nil, fmt.Errorf("state: %w", err)
	}
	if err := projections.Restore(st); err != nil {
		return h, nil, fmt.Errorf("state: %w", err)
	}
	if st.Seq != h.Seq {
		return h, nil, fmt.Errorf("state is at seq %d, header says %d", st.Seq, h.Seq)
	}
	return h, st, nil
}

// checkpointSeq is the sequence a stored checkpoint value was taken at,
// when its header is intact (0 otherwise): the stream held at least that
// many events.
func checkpointSeq(b []byte) uint64 {
	h, _ := header(b)
	return h.Seq
}

// header is the header of a stored checkpoint value, when it is intact
// (its fingerprint matches; the state after it is not checked).
func header(b []byte) (Header, bool) {
	var h Header
	i := bytes.IndexByte(b, '\n')
	if i < 0 || json.Unmarshal(b[:i], &h) != nil || h.Format != Format || h.Fingerprint != h.fingerprint() {
		return Header{}, false
	}
	return h, true
}

// usable is the header of a stored checkpoint value that this build could
// load but for the stream check: intact header, this build's format and
// schema, the state matching its hash (the state itself is not decoded).
func usable(b []byte) (Header, bool) {
	h, ok := header(b)
	if !ok || h.Schema != events.SchemaVersion {
		return Header{}, false
	}
	sum := sha256.Sum256(b[bytes.IndexByte(b, '\n')+1:])
	return h, hex.EncodeToString(sum[:]) == h.StateSHA256
}

// StoredSeq is the sequence of the checkpoint stored in js's state bucket
// (0: none, or not intact): the event stream held at least that many
// events when it was taken. It creates nothing.
func StoredSeq(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	kv, err := js.KeyValue(ctx, eventlog.BucketName)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	entry, err := kv.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return checkpointSeq(entry.Value()), nil
}

// Load returns the checkpoint stored in kv, checked against r's stream
// (the event at its Seq must have the id it names), or nil and the reason
// it was not usable (nil, nil when there is none); and, usable or not, the
// sequence an intact checkpoint header names (0: none).
func Load(ctx context.Context, r *eventlog.Reader, kv jetstream.KeyValue) (*projections.State, uint64, error) {
	entry, err := kv.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	seen := checkpointSeq(entry.Value())
	h, st, err := Decode(entry.Value())
	if err != nil {
		return nil, seen, err
	}
	if h.Seq > 0 {
		rec, err := r.Get(ctx, h.Seq)
		if err != nil {
			return nil, seen, fmt.Errorf("event at seq %d: %w", h.Seq, err)
		}
		if err = rec.Err; errors.Is(err, events.ErrForeign) {
			err = nil // well-formed: its id still tells
		}
		if err == nil && rec.Event.ID != h.LastEventID {
			err = fmt.Errorf("event at seq %d is %s, the checkpoint was taken after %s", h.Seq, rec.Event.ID, h.LastEventID)
		}
		if err != nil {
			return nil, seen, err
		}
	}
	return st, seen, nil
}
