// Package docs_test holds the wire-doc tests: events.md must list, per
// type, exactly the msgpack keys the code writes. It is test-only, like
// integration/, so that the events tests import nothing but events.
package docs_test

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/notify"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// The wire document: docs/events.md must list, per type, exactly the
// msgpack keys the code writes, with their wire types, and its worked
// example must decode to the event it shows.

const wireDoc = "events.md"

// documented are the types whose fields the document lists, by heading.
var documented = map[string]any{
	"Envelope":              events.Envelope{},
	"SnapshotRegistered":    events.SnapshotRegistered{},
	"PlanBuilt":             events.PlanBuilt{},
	"Policy":                events.Policy{},
	"Candidate":             events.Candidate{},
	"IntervalsCompleted":    events.IntervalsCompleted{},
	"IntervalsInvalidated":  events.IntervalsInvalidated{},
	"SchedulerAdvanced":     events.SchedulerAdvanced{},
	"CatchUpRequested":      events.CatchUpRequested{},
	"CatchUpWork":           events.CatchUpWork{},
	"PromotionDecided":      events.PromotionDecided{},
	"ModelFinding":          events.ModelFinding{},
	"Finding":               events.Finding{},
	"EnvironmentFinalized":  events.EnvironmentFinalized{},
	"RepairCompleted":       events.RepairCompleted{},
	"TableRetired":          events.TableRetired{},
	"PlanCancelled":         events.PlanCancelled{},
	"Audit":                 events.Audit{},
	"AuditRecorded":         events.AuditRecorded{},
	"AuditOutcome":          events.AuditOutcome{},
	"AuditStatus":           commands.AuditStatus{},
	"cancel_plan":           commands.CancelPlan{},
	"RunFailure":            commands.RunFailure{},
	"PlanProgress":          commands.PlanProgress{},
	"ModelProgress":         commands.ModelProgress{},
	"retire_tables":         commands.RetireTables{},
	"RetiredTable":          commands.RetiredTable{},
	"Meta":                  commands.Meta{},
	"register_snapshot":     commands.RegisterSnapshot{},
	"register_snapshots":    commands.RegisterSnapshots{},
	"build_plan":            commands.BuildPlan{},
	"complete_intervals":    commands.CompleteIntervals{},
	"invalidate_intervals":  commands.InvalidateIntervals{},
	"advance_scheduler":     commands.AdvanceScheduler{},
	"promote":               commands.Promote{},
	"finalize":              commands.Finalize{},
	"open_repairs":          commands.OpenRepairs{},
	"Reply":                 commands.Reply{},
	"Repair":                commands.Repair{},
	"RunFailed":             events.RunFailed{},
	"fail_run":              commands.FailRun{},
	"complete_work":         commands.CompleteWork{},
	"fail_work":             commands.FailWork{},
	"status":                commands.Status{},
	"EnvStatus":             commands.EnvStatus{},
	"ModelStatus":           commands.ModelStatus{},
	"Item":                  work.Item{},
	"Step":                  work.Step{},
	"SQL":                   work.SQL{},
	"EnvironmentRolledBack": events.EnvironmentRolledBack{},
	"RolledBackModel":       events.RolledBackModel{},
	"RolledBackRepair":      events.RolledBackRepair{},
	"rollback":              commands.Rollback{},
	"RestatementRequested":  events.RestatementRequested{},
	"RestateWork":           events.RestateWork{},
	"restate":               commands.Restate{},
	"RestateProgress":       commands.RestateProgress{},
	// JSON only: `tidemark diff -o json` (the reply of tidemark.wh.diff).
	"DiffReply":  sqlrun.DiffReply{},
	"ModelDiff":  sqlrun.ModelDiff{},
	"ChangedRow": warehouse.ChangedRow{},
	// JSON only: what serve --notify-url POSTs.
	"Notice": notify.Notice{},
}

var (
	timeType  = reflect.TypeOf(time.Time{})
	rangeType = reflect.TypeOf(interval.Range{})
	metaType  = reflect.TypeOf(commands.Meta{})
)

// wireType names how a Go type is written in msgpack.
func wireType(t reflect.Type) string {
	switch {
	case t == timeType:
		return "timestamp"
	case t == rangeType:
		return "range"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "int"
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		return "uint"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return "array of " + wireType(t.Elem())
	case reflect.Map:
		return "map of " + wireType(t.Elem())
	case reflect.Pointer:
		return wireType(t.Elem())
	case reflect.Struct:
		return t.Name()
	case reflect.Interface:
		return "any"
	}
	return t.Kind().String()
}

// fields lists a struct's msgpack keys and wire types (inline Meta is
// documented once, under Meta); a type without msgpack tags, its JSON
// keys (an embedded struct, or pointer to one, inline).
func fields(t reflect.Type) [][2]string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out [][2]string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("msgpack")
		if !ok {
			tag, ok = f.Tag.Lookup("json")
			if !ok && !f.Anonymous {
				tag = "-"
			}
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		name := strings.Split(tag, ",")[0]
		if f.Anonymous {
			if f.Type == metaType {
				out = append(out, [2]string{"(Meta)", "inline"})
				continue
			}
			out = append(out, fields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, [2]string{name, wireType(f.Type)})
	}
	return out
}

var rowRe = regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+?) \\|")

// docTables reads the document's "### Name" sections and their key rows.
func docTables(t *testing.T) (map[string][][2]string, []string) {
	f, err := os.Open(wireDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tables := map[string][][2]string{}
	var lines []string
	cur := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if strings.HasPrefix(line, "### ") {
			cur = strings.Trim(strings.TrimPrefix(line, "### "), "` ")
			continue
		}
		if m := rowRe.FindStringSubmatch(line); m != nil && cur != "" {
			tables[cur] = append(tables[cur], [2]string{m[1], strings.TrimSpace(m[2])})
		}
	}
	return tables, lines
}

func TestWireDocListsEveryField(t *testing.T) {
	tables, _ := docTables(t)
	names := make([]string, 0, len(documented))
	for n := range documented {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		want := fields(reflect.TypeOf(documented[n]))
		got := tables[n]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			var b strings.Builder
			for _, f := range want {
				fmt.Fprintf(&b, "| `%s` | %s |  |\n", f[0], f[1])
			}
			t.Errorf("docs/events.md section %q lists %v,\nthe code writes %v; rows:\n%s", n, got, want, b.String())
		}
	}
}

// TestWireDocExample decodes the worked example's bytes and compares the
// event with the JSON the document shows next to them.
func TestWireDocExample(t *testing.T) {
	_, lines := docTables(t)
	block := func(lang string) string {
		var b strings.Builder
		in := false
		for _, l := range lines {
			switch {
			case l == "```"+lang:
				in = true
			case in && l == "```":
				return b.String()
			case in:
				b.WriteString(l + "\n")
			}
		}
		t.Fatalf("no ```%s block in %s", lang, wireDoc)
		return ""
	}
	raw, err := hex.DecodeString(strings.Join(strings.Fields(block("hex")), ""))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Decode(raw)
	if err != nil {
		t.Fatalf("the example does not decode: %v", err)
	}
	got, err := json.MarshalIndent(map[string]any{"envelope": ev.Envelope, "data": ev.Payload}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(block("json")); string(got) != want {
		t.Fatalf("the example decodes to\n%s\nbut the document shows\n%s", got, want)
	}
	// And the bytes are what this build writes for that event.
	again, err := events.Encode(ev)
	if err != nil || hex.EncodeToString(again) != hex.EncodeToString(raw) {
		t.Fatalf("re-encoding the example gives other bytes:\n%x\n%x", again, raw)
	}
}

// The command example in the document is a valid complete_intervals body.
func TestWireDocCommandExample(t *testing.T) {
	_, lines := docTables(t)
	var body strings.Builder
	for i, l := range lines {
		if strings.HasPrefix(l, "The same completion as a command") {
			for _, b := range lines[i+1:] {
				if strings.HasPrefix(b, "    ") {
					body.WriteString(b)
				} else if body.Len() > 0 {
					break
				}
			}
		}
	}
	cmd, err := commands.Decode(commands.KindCompleteIntervals, commands.ContentJSON, []byte(body.String()))
	if err != nil {
		t.Fatalf("the command example %q does not decode: %v", body.String(), err)
	}
	c := cmd.(*commands.CompleteIntervals)
	if c.Model != "events" || c.RunKind != events.RunScheduled || len(c.Ranges) != 1 || c.Ranges[0].String() != "2026-12-01T10:00:00Z/2026-12-01T11:00:00Z" {
		t.Fatalf("decoded %+v", c)
	}
	// The event of the worked example is this command's: its causation
	// and digest.
	var hexLines []string
	in := false
	for _, l := range lines {
		switch {
		case l == "```hex":
			in = true
		case in && l == "```":
			in = false
		case in:
			hexLines = append(hexLines, l)
		}
	}
	raw, err := hex.DecodeString(strings.Join(hexLines, ""))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Causation != c.ID || ev.Digest != commands.Digest(c) {
		t.Fatalf("the example event (causation %s, digest %s) is not the command's (%s, %s)", ev.Causation, ev.Digest, c.ID, commands.Digest(c))
	}
}

// TestNotificationExample: the document's notification example is a
// Notice, with no key the code does not write.
func TestNotificationExample(t *testing.T) {
	_, lines := docTables(t)
	var b strings.Builder
	section, in := false, false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "## "):
			section = strings.HasPrefix(l, "## Notifications")
		case section && l == "```json":
			in = true
		case in && l == "```":
			in, section = false, false
		case in:
			b.WriteString(l + "\n")
		}
	}
	dec := json.NewDecoder(strings.NewReader(b.String()))
	dec.DisallowUnknownFields()
	var n notify.Notice
	if err := dec.Decode(&n); err != nil || n.Kind == "" || n.Key == "" || n.Seq == 0 {
		t.Fatalf("the notification example %q: %+v %v", b.String(), n, err)
	}
}
