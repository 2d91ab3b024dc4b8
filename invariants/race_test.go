//go:build race

package invariants

// The race detector makes the pure core about five times slower; CI runs
// the suite under it, so it plays fewer histories there to stay well
// under two minutes.
func init() { defaultChecks = "300" }
