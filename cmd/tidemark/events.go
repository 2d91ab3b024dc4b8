package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
)

func newEventsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Read the event stream as it is stored: follow it (tail) or fetch one event (get)",
	}
	cmd.AddCommand(newEventsTailCmd(), newEventsGetCmd())
	return cmd
}

func newEventsTailCmd() *cobra.Command {
	var s storeFlags
	var subjects []string
	var from uint64
	var since time.Duration
	var limit int
	var output string
	cmd := &cobra.Command{
		Use:   "tail [--subject S] [--from SEQ | --since DUR] [-o json]",
		Short: "Print the events of the stream, one line each, following new ones until interrupted",
		Long: "tail prints every event from the start of the stream (or --from SEQ, or those that\n" +
			"occurred within --since DUR) on the server at --nats-url, one line per event: sequence,\n" +
			"time, subject, type and the payload as compact JSON (-o json: one JSON object per line),\n" +
			"then waits for new events until interrupted (Ctrl-C) or --limit events are printed.\n" +
			"With --data-dir (a stopped store) it stops after the last event.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from > 0 && since > 0 {
				return &exitError{kind: usage, err: errors.New("give one of --from and --since, not both")}
			}
			if limit < 0 || since < 0 {
				return &exitError{kind: usage, err: errors.New("--limit and --since must not be negative")}
			}
			for i, sub := range subjects {
				subjects[i] = fullSubject(sub)
			}
			var cutoff time.Time
			if since > 0 {
				cutoff = time.Now().Add(-since)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			r, minLast, closeStore, err := s.stream(ctx)
			if err != nil {
				return err
			}
			defer closeStore()
			out := cmd.OutOrStdout()
			printed := 0
			errLimit := errors.New("limit reached")
			show := func(rec events.Record) error {
				if !cutoff.IsZero() && rec.Err == nil && rec.Event.OccurredAt.Before(cutoff) {
					return nil
				}
				if err := printEvent(out, rec, output); err != nil {
					return err
				}
				if printed++; limit > 0 && printed >= limit {
					return errLimit
				}
				return nil
			}
			if s.dataDir != "" {
				// A stopped store: nothing will be appended, so read to
				// its end, and report what it lost.
				recs, err := r.Read(ctx, eventlog.ReadOptions{MinLastSeq: minLast})
				d, damaged := eventlog.IsDamage(err)
				if err != nil && !damaged {
					return &exitError{kind: usage, err: err}
				}
				for _, rec := range recs {
					if rec.Seq < from || !matchAny(subjects, rec.Subject) {
						continue
					}
					if err := show(rec); errors.Is(err, errLimit) {
						break
					} else if err != nil {
						return err
					}
				}
				return damageExit(d)
			}
			err = r.Tail(ctx, from, func(e eventlog.Entry) error { return show(e.Record) }, subjects...)
			switch {
			case errors.Is(err, errLimit):
				return nil
			case cmd.Context().Err() != nil:
				return nil // interrupted: the way to stop following
			}
			return &exitError{kind: usage, err: fmt.Errorf("tail: %w", err)}
		},
	}
	s.register(cmd, false)
	fl := cmd.Flags()
	fl.StringSliceVar(&subjects, "subject", nil, "only events on this subject (NATS wildcards allowed; a subject not starting with tidemark. is taken under "+events.SubjectPrefix+"; repeat for several)")
	fl.Uint64Var(&from, "from", 0, "start at this stream sequence")
	fl.DurationVar(&since, "since", 0, "only events that occurred within this long before now (the stream is scanned from its start)")
	fl.IntVar(&limit, "limit", 0, "stop after this many events (0: follow until interrupted)")
	outputFlag(cmd, &output, "table", "json")
	return cmd
}

func newEventsGetCmd() *cobra.Command {
	var s storeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "get SEQ",
		Short: "Print the event stored at a stream sequence, or every event of a group message (exit 3 when the stream does not hold it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || seq == 0 {
				return &exitError{kind: usage, err: fmt.Errorf("SEQ %q: want a stream sequence (1, 2, …)", args[0])}
			}
			r, _, closeStore, err := s.stream(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			recs, err := r.GetAll(cmd.Context(), seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return &exitError{kind: notFound, err: fmt.Errorf("no event at seq %d", seq)}
			}
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			for _, rec := range recs {
				if err := printEvent(cmd.OutOrStdout(), rec, output); err != nil {
					return err
				}
			}
			return nil
		},
	}
	s.register(cmd, false)
	outputFlag(cmd, &output, "table", "json")
	return cmd
}

// eventLine is an event as events tail and get print it with -o json.
type eventLine struct {
	Seq uint64 `json:"seq"`
	// Index is the event's place in a group message (seq:index in the
	// table).
	Index       int       `json:"index,omitempty"`
	At          time.Time `json:"at,omitzero"`
	Subject     string    `json:"subject"`
	Type        string    `json:"type,omitempty"`
	ID          string    `json:"id,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	Causation   string    `json:"causation,omitempty"`
	Correlation string    `json:"correlation,omitempty"`
	Payload     any       `json:"payload,omitempty"`
	// Error says why the message is not a tidemark event.
	Error string `json:"error,omitempty"`
}

func toLine(rec events.Record) eventLine {
	l := eventLine{Seq: rec.Seq, Index: rec.Index, Subject: rec.Subject}
	if rec.Err != nil {
		l.Error = rec.Err.Error()
		return l
	}
	e := rec.Event
	l.At, l.Type, l.ID, l.Actor, l.Causation, l.Correlation, l.Payload = e.OccurredAt.UTC(), string(e.Type), e.ID, e.Actor, e.Causation, e.Correlation, e.Payload
	return l
}

// printEvent prints rec as one line: seq, time, subject, type and the
// compact JSON payload; or as one JSON object (output json).
func printEvent(w io.Writer, rec events.Record, output string) error {
	l := toLine(rec)
	if output == "json" {
		return json.NewEncoder(w).Encode(l)
	}
	if l.Error != "" {
		_, err := fmt.Fprintf(w, "%s\t-\t%s\t(not a tidemark event)\t%s\n", address(rec), l.Subject, l.Error)
		return err
	}
	payload, err := json.Marshal(l.Payload)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", address(rec), l.At.Format(time.RFC3339), l.Subject, l.Type, payload)
	return err
}

// address is an event's address as the table prints it: its sequence, and
// for an event in a group message, ":" and its index.
func address(rec events.Record) string {
	if rec.Count > 0 {
		return fmt.Sprintf("%d:%d", rec.Seq, rec.Index)
	}
	return strconv.FormatUint(rec.Seq, 10)
}

// fullSubject puts a short subject (plan.p1) under the event prefix.
func fullSubject(s string) string {
	if strings.HasPrefix(s, "tidemark.") || s == ">" {
		return s
	}
	return events.SubjectPrefix + s
}

// matchAny reports whether subject matches one of the NATS subject
// filters (none: every subject matches).
func matchAny(filters []string, subject string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if matchSubject(f, subject) {
			return true
		}
	}
	return false
}

// matchSubject matches a subject against a NATS filter: * is one token,
// > the rest (one token or more).
func matchSubject(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}
