// Package engine is tidemark's writer on NATS JetStream: on a connection
// it is given (package natsnode starts the server), it ensures the event
// log (package eventlog, its only path to the stream), folds the live
// projection, and carries out commands: it reads the projection, calls
// the pure core (package decide) and appends the decision's events under
// its condition, re-deciding after a conflict. The loops that issue
// commands on their own live in package scheduler, the worker protocol in
// work.
// Importers: cmd/tidemark, scenario, bench, internal/jstest, tests.
//
// Data flows one way: command → validation → decision against the
// projection at sequence S → conditional append → stream → projection.
// Command handling in one engine is serialised by cmdMu. Every append
// carries the fencing token, the stream sequence its decision read
// (decide.Decision.Expect), so of two engines acting on one state only one
// appends: the other re-reads and re-decides. Package cluster makes one
// engine of those sharing a stream the writer, the others forwarding to it.
//
// Completions are group-committed (group.go): several groups may be in
// flight at once, but never two touching the same subject, table or
// command id, and every other command waits until none is in flight.
// Under Config.Coalesce one committer goroutine stores them instead, one
// group message in flight (committer.go).
//
// Lock order: cmdMu, flightMu, then the live projection's mu (held only
// while deciding).
package engine
