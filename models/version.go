// Package models is what a model version is: its definition's fingerprint
// and the names of its versions (content-derived and plan-derived).
//
// Importers: commands, modelfile, projections, decide, scenario.
package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// Fingerprint identifies a snapshot definition: two registrations with the
// same fingerprint are the same version. Stored fingerprints are compared
// with new ones, so its output must never change (a golden test pins it).
// A version's SQL (its exact bytes, hashed) and time column are part of it;
// they enter the input only when set, so fingerprints of versions without
// SQL are those computed before SQL existed. BatchSize,
// BatchConcurrency and Audits enter it the same way, each only when set,
// and so does Grain (in its order), a seed's content (hashed),
// the macro vocabulary and the freshness bound.
func Fingerprint(r events.SnapshotRegistered) string {
	deps := append([]string(nil), r.DependsOn...)
	sort.Strings(deps)
	ups := append([]string(nil), r.Upstream...)
	sort.Strings(ups)
	h := sha256.New()
	fmt.Fprintf(h, "model=%s\ncron=%s\nunit=%s\nstart=%d\nlookback=%d\nkind=%s\npartials=%t\ndeps=%s\nupstream=%s\n",
		r.Model, interval.NormalizeCron(r.Cron), r.Unit, r.Start.Unix(), r.Lookback, r.Kind, r.AllowPartials,
		strings.Join(deps, ","), strings.Join(ups, ","))
	if r.SQL != "" || r.TimeColumn != "" {
		// Only when set, so a version without SQL keeps its fingerprint.
		sum := sha256.Sum256([]byte(r.SQL))
		fmt.Fprintf(h, "sql=%s\ntime_column=%s\n", hex.EncodeToString(sum[:]), r.TimeColumn)
	}
	// The same for the batch fields: each only when set.
	if r.BatchSize != 0 {
		fmt.Fprintf(h, "batch_size=%d\n", r.BatchSize)
	}
	if r.BatchConcurrency != 0 {
		fmt.Fprintf(h, "batch_concurrency=%d\n", r.BatchConcurrency)
	}
	// Audits the same way: only when the version declares any, as the
	// JSON of the list (its fields in their declared order, a custom
	// audit's SQL as written), so their order and every field count.
	if len(r.Audits) > 0 {
		b, _ := json.Marshal(r.Audits) // strings and numbers: never fails
		fmt.Fprintf(h, "audits=%s\n", b)
	}
	if len(r.Grain) > 0 {
		fmt.Fprintf(h, "grain=%s\n", strings.Join(r.Grain, ","))
	}
	// A seed's content (hashed) and the macro vocabulary: only when set.
	if r.Seed != "" {
		sum := sha256.Sum256([]byte(r.Seed))
		fmt.Fprintf(h, "seed=%s\n", hex.EncodeToString(sum[:]))
	}
	if r.Macros != "" {
		fmt.Fprintf(h, "macros=%s\n", r.Macros)
	}
	// Freshness too: only when set.
	if r.Freshness != "" {
		fmt.Fprintf(h, "freshness=%s\n", r.Freshness)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// DerivedVersion is the version a plan gives a downstream model it does not
// set: "<base>+<plan id>", where base is the incumbent's version up to its
// first '+' ("v1+p1" derives "v1+p2", never "v1+p1+p2"), so derived names
// never grow.
func DerivedVersion(incumbentVersion, plan string) string {
	base, _, _ := strings.Cut(incumbentVersion, "+")
	return base + "+" + plan
}

// ContentVersion names a definition by its fingerprint: "d" + 10 hex. r
// holds the normalized definition (its schedule's cron and unit, its kind
// defaulted).
func ContentVersion(r events.SnapshotRegistered) string {
	return "d" + Fingerprint(r)[:10]
}
