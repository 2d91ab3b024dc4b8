// Package invariants is a property-based suite (pgregory.net/rapid) that
// hunts for wrong decisions: it plays random deployment histories against
// tidemark's pure decision core (decide.Decide, projections.Apply, the
// policy) on a simulated clock, with a simulated worker that completes the
// work work.Of derives from each command's events, and checks the
// invariants of DESIGN.md after every step. It needs no NATS server.
//
// The package has no non-test code; see invariants_test.go for the list of
// invariants and how a counterexample is reported.
package invariants
