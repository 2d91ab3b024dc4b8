// Package projections folds events into the state every decision reads:
// snapshots and their schedules, coverage and frontier per table,
// environments (incumbent per model, generation, finalization), plans with
// their decisions, and the command ids already applied.
//
// Apply is a pure, deterministic fold: it never reads the wall clock, random
// state or the network, so folding the same events from sequence 1 always
// yields the same State, live or in replay. Events must be applied in stream
// order; an event at or below State.Seq is ignored, which makes redelivery
// harmless.
//
// Importers: policy, decide, views, replay, live, checkpoint, engine, work,
// scheduler, web, scenario, bench.
package projections
