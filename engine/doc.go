// Package engine is tidemark's writer on NATS JetStream: on a connection
// it is given (package natsnode starts the server), it ensures the event
// log (package eventlog, its only path to the stream), folds the live
// projection, and carries out commands: it reads the projection, calls
// the pure core (package decide) and appends the decision's events under
// its condition, re-deciding after a conflict. The loops that issue
// commands on their own live in package scheduler, the worker protocol in
// work.
// Importers: server (serve), cmd/tidemark, scenario, bench, internal/jstest,
// tests.
//
// Its surface is what its callers need, not a locator of its parts: Open
// and Close, Handle (it is a commands.Handler), Projection (the live
// projection: Read, Watch, Await, WaitFor), Log (the *eventlog.Log it
// writes through: its JetStream handle, Config, Reader, Bucket, Retry),
// Now (its clock), Registry (its metrics), Failed and Err, CatchUp, Stats
// and Checkpoint. The components around it (scheduler, work, notify,
// cluster, web) take those parts as fields of their own; package server
// (tidemark serve's composition root) hands them over.
//
// Data flows one way: command → validation → decision against the
// projection at sequence S → conditional append → stream → projection.
// Command handling in one engine is serialised by cmdMu. Every append
// carries the fencing token, the stream sequence its decision read
// (decide.Decision.Expect), so of two engines acting on one state only one
// appends: the other re-reads and re-decides. Package cluster makes one
// engine of those sharing a stream the writer, the others forwarding to it.
//
// Completions are group-committed: one committer goroutine
// (committer.go) decides a group of independent completions against one
// view under cmdMu, publishes it (one group message under
// Config.Coalesce, else pipelined messages, group.go), collects its acks
// without cmdMu, applies it to the projection in stream order and then
// answers. One group is in flight at a time; every other command, and
// every completion that cannot go in a group, waits for it to land.
//
// Lock order: cmdMu, then the live projection's mu (held only while
// deciding or applying); queueMu is taken alone.
package engine
