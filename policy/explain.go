package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// The helpers below write the human sentences of findings. They must be
// deterministic: a re-evaluated decision reproduces its findings exactly.

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func ts(t time.Time) string {
	if t.IsZero() {
		return "(none)"
	}
	return t.UTC().Format(time.RFC3339)
}

// maxListed bounds the ranges a sentence spells out; the finding's
// ranges field holds them all.
const maxListed = 3

func ranges(rs []interval.Range) string {
	switch len(rs) {
	case 0:
		return "nothing"
	case 1:
		return rs[0].String()
	}
	n := min(len(rs), maxListed)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = rs[i].String()
	}
	if len(rs) > n {
		return fmt.Sprintf("%d ranges (%s, …)", len(rs), strings.Join(parts, ", "))
	}
	return fmt.Sprintf("%d ranges (%s)", len(rs), strings.Join(parts, ", "))
}

func advances(n int) string {
	if n == 1 {
		return "1 scheduler advance"
	}
	return fmt.Sprintf("%d scheduler advances", n)
}

func schedOfSnap(sn *projections.Snapshot) string {
	if sn == nil {
		return "(unregistered)"
	}
	return schedOf(sn.Schedule.Cron(), sn.Schedule.Unit())
}

func schedOf(cron string, u interval.Unit) string { return fmt.Sprintf("%q (unit %s)", cron, u) }

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
