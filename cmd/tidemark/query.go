package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/work/sqlrun"
)

func newQueryCmd() *cobra.Command {
	var natsURL, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "query SQL",
		Short: "Run read-only SQL against the warehouse, through the process that owns it",
		Long: "query sends one read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, VALUES, TABLE) to the\n" +
			"process that owns the warehouse (serve with a warehouse) and prints its rows. Environments are\n" +
			"schemas of views: SELECT * FROM prod.events reads what prod serves.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep sqlrun.QueryReply
			if err := whRequest(cmd, natsURL, sqlrun.QuerySubject, sqlrun.QueryRequest{SQL: args[0]}, timeout, &rep); err != nil {
				return err
			}
			if rep.Error != "" {
				return rejection(rep.Code, rep.Error)
			}
			if err := printRows(cmd.OutOrStdout(), output, rep.Columns, rep.Rows); err != nil {
				return err
			}
			if rep.Truncated {
				// On stderr: json and csv output stay rows only.
				fmt.Fprintf(cmd.ErrOrStderr(), "truncated: the answer has more rows than the %d shown (the server's --query-max-rows and --query-max-bytes); narrow the query or add a LIMIT\n", len(rep.Rows))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats-url", defaultNatsURL, natsURLUsage)
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	outputFlag(cmd, &output, "table", "json", "csv")
	return cmd
}

// whRequest sends a JSON request to a warehouse subject and decodes the
// JSON reply into out.
func whRequest(cmd *cobra.Command, url, subject string, req any, timeout time.Duration, out any) error {
	nc, err := connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := nc.Request(subject, body, timeout)
	if errors.Is(err, nats.ErrNoResponders) {
		return &exitError{kind: usage, err: fmt.Errorf("no process serves the warehouse at %s (run tidemark serve --builtin-worker): %w", url, err)}
	}
	if err != nil {
		return &exitError{kind: usage, err: fmt.Errorf("%s: %w", subject, err)}
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%s: undecodable reply: %w", subject, err)
	}
	return nil
}

// printRows prints a result as an aligned table, JSON (one object per
// row) or CSV.
func printRows(w io.Writer, format string, cols []string, rows [][]any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		for _, r := range rows {
			obj := make(map[string]any, len(cols))
			for i, c := range cols {
				if i < len(r) {
					obj[c] = r[i]
				}
			}
			if err := enc.Encode(obj); err != nil {
				return err
			}
		}
		return nil
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(cols); err != nil {
			return err
		}
		for _, r := range rows {
			rec := make([]string, len(r))
			for i, v := range r {
				rec[i] = cell(v)
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = cell(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(%d rows)\n", len(rows))
	return nil
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprintf("%d", int64(x))
		}
	}
	return fmt.Sprint(v)
}
