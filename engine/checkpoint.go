package engine

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

// checkpointKey is the one key the engine writes in the state bucket
// (eventlog.BucketName).
const checkpointKey = "projections"

// CheckpointFormat is the layout of a checkpoint. Bump it whenever the
// projection state changes shape or meaning: older checkpoints are then
// ignored and the state is rebuilt from the stream.
const CheckpointFormat = 5

// DefaultCheckpointEvery is how many newly folded events make the engine
// write a checkpoint.
const DefaultCheckpointEvery = 10_000

// checkpointHeader is the first line of a checkpoint value; the gzipped
// JSON state follows it.
type checkpointHeader struct {
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

func (h checkpointHeader) fingerprint() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "tidemark-checkpoint|%d|%d|%d|%s|%s", h.Format, h.Schema, h.Seq, h.LastEventID, h.StateSHA256))
	return hex.EncodeToString(sum[:])
}

// encodeCheckpoint serialises st; lastID is the id of the event at st.Seq.
func encodeCheckpoint(st *projections.State, lastID string) ([]byte, uint64, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, 0, err
	}
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	if _, err := zw.Write(raw); err != nil {
		return nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, err
	}
	sum := sha256.Sum256(body.Bytes())
	h := checkpointHeader{Format: CheckpointFormat, Schema: events.SchemaVersion, Seq: st.Seq, LastEventID: lastID, StateSHA256: hex.EncodeToString(sum[:])}
	h.Fingerprint = h.fingerprint()
	head, err := json.Marshal(h)
	if err != nil {
		return nil, 0, err
	}
	return append(append(head, '\n'), body.Bytes()...), st.Seq, nil
}

// decodeCheckpoint parses and verifies a checkpoint value. Any mismatch is
// an error: the caller rebuilds instead of trusting it.
func decodeCheckpoint(b []byte) (checkpointHeader, *projections.State, error) {
	var h checkpointHeader
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return h, nil, errors.New("no header line")
	}
	if err := json.Unmarshal(b[:i], &h); err != nil {
		return h, nil, fmt.Errorf("header: %w", err)
	}
	switch {
	case h.Format != CheckpointFormat:
		return h, nil, fmt.Errorf("format %d, this build reads %d", h.Format, CheckpointFormat)
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

// checkpoints stores projection checkpoints in the KV bucket.
type checkpoints struct {
	kv     jetstream.KeyValue
	reader *eventlog.Reader
}

// checkpointSeq is the sequence a stored checkpoint value was taken at,
// when its header is intact (0 otherwise): the stream held at least that
// many events.
func checkpointSeq(b []byte) uint64 {
	var h checkpointHeader
	i := bytes.IndexByte(b, '\n')
	if i < 0 || json.Unmarshal(b[:i], &h) != nil || h.Format != CheckpointFormat || h.Fingerprint != h.fingerprint() {
		return 0
	}
	return h.Seq
}

// StoredCheckpointSeq is the sequence of the checkpoint stored in js's
// checkpoint bucket (0: none, or not intact): the event stream held at
// least that many events when it was taken.
func StoredCheckpointSeq(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	kv, err := js.KeyValue(ctx, eventlog.BucketName)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	entry, err := kv.Get(ctx, checkpointKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return checkpointSeq(entry.Value()), nil
}

// load returns the stored checkpoint's state, or nil and the reason it was
// not usable (nil, nil when there is none); and, usable or not, the
// sequence an intact checkpoint header names (0: none).
func (c *checkpoints) load(ctx context.Context) (*projections.State, uint64, error) {
	entry, err := c.kv.Get(ctx, checkpointKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	seen := checkpointSeq(entry.Value())
	h, st, err := decodeCheckpoint(entry.Value())
	if err != nil {
		return nil, seen, err
	}
	if h.Seq > 0 {
		rec, err := c.reader.Get(ctx, h.Seq)
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

func (c *checkpoints) save(ctx context.Context, value []byte) error {
	_, err := c.kv.Put(ctx, checkpointKey, value)
	return err
}

// Bucket is the checkpoint bucket, which also holds the work publisher's
// cursor (package work); nil when checkpoints are off (CheckpointEvery < 0).
func (e *Engine) Bucket() jetstream.KeyValue {
	if e.cp == nil {
		return nil
	}
	return e.cp.kv
}
