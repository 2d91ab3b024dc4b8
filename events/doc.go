// Package events defines tidemark's immutable facts: one envelope for every
// event, a typed payload per event type, their msgpack codec and the NATS
// subjects they are stored under.
//
// # Invariants
//
//   - Every event lives on exactly one JetStream subject, the subject of its
//     aggregate: tidemark.evt.snap.<model>.<version> for a snapshot
//     (SubjectToken: a schema-qualified model's '.' is written ':'),
//     tidemark.evt.plan.<plan> for a plan, tidemark.evt.env.<env> for an
//     environment. Payload.Subject gives it.
//   - Field names (msgpack keys) are stable: they are the wire contract for
//     services in other languages. A change that is not purely additive bumps
//     SchemaVersion; a decoder refuses versions newer than it knows with
//     *DecodeError of kind UnsupportedVersion, and unknown types with kind
//     UnknownType. Decoding never panics.
//   - Times are UTC. Envelope and payload instants are msgpack timestamps
//     (extension -1); interval ranges are [start, end) arrays of two Unix
//     seconds.
//   - Event ids are ULIDs, monotonic within a process (IDSource).
//
// # Usage
//
//	ev := events.New(ids, at, events.SnapshotRegistered{...})
//	b, err := events.Encode(ev)
//	back, err := events.Decode(b)
//
// Importers: every package of the module but events/interval and
// internal/msgp.
package events
