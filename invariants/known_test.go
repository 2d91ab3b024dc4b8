package invariants

import (
	"flag"
)

// Known bugs: each has a failing scenario under testdata/scenarios/. While
// it is open the suite steers around it (see avoid's callers), so that it
// keeps finding new ones. Run with -invariants.known to stop avoiding them
// (to see them found again, or to check a fix).
const (
	// bugBackfillThrough: engine.BackfillWork clips at `through` itself,
	// not floored to each candidate's unit: the worker gets a partial
	// interval the engine refuses (rapid-backfill-through-unaligned.yaml).
	// Avoided by flooring the clip per step before running the item.
	bugBackfillThrough = "backfill-through"
	// bugPartialBackfill: a plan's backfill set is the candidate's missing
	// time, not whole intervals: an allow_partials candidate that holds part
	// of an interval gets a range starting inside it, which the engine
	// refuses (rapid-partial-backfill-unaligned.yaml). Avoided by widening
	// backfill sets and backfill work to whole intervals (Schedule.Work).
	bugPartialBackfill = "partial-backfill"
	// bugForwardOnlyOtherEnv: a forward-only version bound to its
	// incumbent's table in one env, planned in an env where its model has
	// no incumbent, writes that other env's production table instead of a
	// new one (rapid-forward-only-other-env-table.yaml). Avoided by not
	// setting such a version in such a plan.
	bugForwardOnlyOtherEnv = "forward-only-other-env"
)

var known = flag.Bool("invariants.known", false, "do not steer around the known bugs listed in known_test.go")

func avoid(bug string) bool { return !*known }
