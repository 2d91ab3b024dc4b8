package events

import (
	"strconv"
	"strings"
)

// Work item ids. The engine derives work from events (a plan's backfill,
// a tick's advances, a catch-up request, an acceptance's repairs, a
// restatement) and names each item after the stream sequence of the event
// that made it due and its run kind: work-<seq>-<run kind>. A worker's report names the
// item it computed, and the engine checks the report against that item.

// WorkID is the id of the work item of run kind k made due by the event
// at stream sequence seq.
func WorkID(seq uint64, k RunKind) string {
	return "work-" + strconv.FormatUint(seq, 10) + "-" + string(k)
}

// ParseWorkID splits a work item id; ok is false unless id is exactly
// work-<seq>-<kind>, seq >= 1 in decimal without leading zeros, kind a run
// kind work is issued for (not manual).
func ParseWorkID(id string) (seq uint64, k RunKind, ok bool) {
	rest, found := strings.CutPrefix(id, "work-")
	if !found {
		return 0, "", false
	}
	num, kind, found := strings.Cut(rest, "-")
	if !found || num == "" || num[0] == '0' || len(num) > 20 {
		return 0, "", false
	}
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, "", false
	}
	switch k = RunKind(kind); k {
	case RunBackfill, RunScheduled, RunCatchUp, RunRepair, RunRestate:
		return seq, k, true
	}
	return 0, "", false
}
