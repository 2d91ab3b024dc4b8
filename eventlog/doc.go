// Package eventlog is the one home of tidemark's log on NATS JetStream: the
// event stream TIDEMARK and the state bucket beside it (projection
// checkpoints and the work publisher's cursor). It is the only package that
// appends to the stream or follows it.
//
// Writers get a *Log from Ensure, which creates or updates the stream and
// the bucket. The components beside the writer take its *Log
// (engine.Engine.Log) for what they need of the store: its Reader, Bucket
// (their cursors), JetStream handle, Config (the replicas and storage
// their own streams follow) and Retry. Append is the only conditional publish: one command's events
// go in as one message or one atomic batch, never half, each under the
// events.Expect the decision was made with; a lost condition is
// ErrConflict, a lost acknowledgement ErrAmbiguous. AppendAsync is the same
// for a single event, acknowledged later (the engine's group commit), and
// AppendGroup (PublishGroup and AwaitGroup: the same in two halves) store
// several commands' events as one group message on GroupSubject under the
// stream's last sequence (one fsync: group.go); every reader expands a group message into its events,
// each addressed by (Seq, Index) (Expand).
//
// Readers get a *Reader from OpenReader, which creates and writes nothing
// (it opens a damaged store too). Read loads a prefix of the stream with
// batched direct gets (no consumer, no server-side state), Get one event,
// and Tail is the only ordered consumer: it hands every event from a
// sequence on, in order, to a callback, until the callback fails or the
// context ends.
//
// Invariants. The stream denies deletes and purges and has no limits
// (StreamConfig): every sequence from 1 to the last holds an event for
// good, so a sequence the server reports missing is damage (a *Damage),
// never something to wait for. Message ids derive from the command (MsgID),
// so a retried append is deduplicated; its condition stops it anyway.
//
// Importers: engine (the writer), live (Tail), checkpoint, work and notify
// (Tail and the bucket), cluster (the lease bucket beside it), web (a
// Reader), cmd/tidemark (read-only verbs through OpenReader), bench,
// scenario and tests. It imports only events (and jetstream, orbit).
package eventlog
