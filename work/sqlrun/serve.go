package sqlrun

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tidemark/tidemark/commands"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/warehouse"
)

// The warehouse over NATS. One process owns a DuckDB file, so users read
// the data through it: `tidemark query`, `tidemark verify` and `tidemark
// diff` send a JSON request to QuerySubject, VerifySubject or DiffSubject
// (diff.go), which the process that owns
// the warehouse serves (serve --builtin-worker, or serve --warehouse
// postgres://… shared with `tidemark worker --warehouse` processes). All
// only read.

// QuerySubject and VerifySubject are the warehouse's request subjects.
const (
	QuerySubject  = "tidemark.wh.query"
	VerifySubject = "tidemark.wh.verify"
)

// QueryRequest is a read-only SQL statement.
type QueryRequest struct {
	SQL string `json:"sql"`
}

// QueryReply is its result, or why there is none. Truncated says the
// statement had more rows than the reply holds: the warehouse stopped
// reading at its query limits (warehouse.Options.QueryLimits, serve's
// --query-max-rows and --query-max-bytes), or at the NATS maximum payload.
type QueryReply struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	Truncated bool     `json:"truncated,omitempty"`
	Error     string   `json:"error,omitempty"`
	// Code is the commands code of a refusal (replyCode): invalid for a
	// statement the warehouse refuses, unavailable when its time ran out.
	Code string `json:"code,omitempty"`
}

// VerifyRequest asks to verify env's SQL models (one, when Model is set).
type VerifyRequest struct {
	Env   string `json:"env"`
	Model string `json:"model,omitempty"`
}

// VerifyReply is a Diff per model, or why there is none (Error, with
// its Code: not_found for an unknown env or model, invalid for a
// malformed request, unavailable when the time ran out).
type VerifyReply struct {
	Models map[string]warehouse.Diff `json:"models"`
	Error  string                    `json:"error,omitempty"`
	Code   string                    `json:"code,omitempty"`
}

// maxQueryBytes bounds a query's text.
const maxQueryBytes = 64 << 10

// replyLimits are wh's query limits, with the byte limit lowered to fit
// a reply in maxPayload (the reply's envelope is counted by Result.Size).
func replyLimits(wh *warehouse.Warehouse, maxPayload int64) warehouse.Limits {
	lim := wh.Limits()
	if maxPayload > 0 && int64(lim.Bytes) > maxPayload {
		lim.Bytes = int(maxPayload)
	}
	return lim
}

// clip bounds an error's text in a reply (commands.MaxErrorText, cut at
// a UTF-8 boundary).
func clip(s string) string { return commands.BoundText(s, commands.MaxErrorText) }

// Serve answers query, verify and diff requests on nc until the returned
// stop is called. Each request runs with timeout.
func Serve(nc *nats.Conn, wh *warehouse.Warehouse, proj *live.Projection, timeout time.Duration, log *slog.Logger) (stop func(), err error) {
	if timeout <= 0 {
		timeout = time.Minute
	}
	reply := func(m *nats.Msg, v any) {
		b, err := json.Marshal(v)
		if err == nil && int64(len(b)) > nc.MaxPayload() {
			err = fmt.Errorf("the reply is %d bytes, more than the server's maximum payload %d", len(b), nc.MaxPayload())
		}
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": clip(err.Error())})
		}
		if err := m.Respond(b); err != nil && log != nil {
			log.Warn("warehouse reply", "subject", m.Subject, "err", err)
		}
	}
	q, err := nc.Subscribe(QuerySubject, func(m *nats.Msg) {
		go func() {
			var req QueryRequest
			if err := json.Unmarshal(m.Data, &req); err != nil || req.SQL == "" || len(req.SQL) > maxQueryBytes {
				reply(m, QueryReply{Error: fmt.Sprintf("want {\"sql\": \"…\"} of at most %d bytes", maxQueryBytes), Code: string(commands.CodeInvalid)})
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			res, err := wh.QueryLimited(ctx, req.SQL, replyLimits(wh, nc.MaxPayload()))
			if err != nil {
				reply(m, QueryReply{Error: clip(err.Error()), Code: replyCode(err, commands.CodeInvalid)})
				return
			}
			reply(m, QueryReply{Columns: res.Columns, Rows: res.Rows, Truncated: res.Truncated})
		}()
	})
	if err != nil {
		return nil, err
	}
	v, err := nc.Subscribe(VerifySubject, func(m *nats.Msg) {
		go func() {
			var req VerifyRequest
			if err := json.Unmarshal(m.Data, &req); err != nil || req.Env == "" {
				reply(m, VerifyReply{Error: "want {\"env\": \"…\", \"model\": \"…\"}", Code: string(commands.CodeInvalid)})
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			diffs, err := VerifyEnv(ctx, wh, proj, req.Env, req.Model)
			if err != nil {
				reply(m, VerifyReply{Error: clip(err.Error()), Code: replyCode(err, "")})
				return
			}
			reply(m, VerifyReply{Models: diffs})
		}()
	})
	if err != nil {
		_ = q.Unsubscribe()
		return nil, err
	}
	df, err := nc.Subscribe(DiffSubject, func(m *nats.Msg) {
		go func() {
			var req DiffRequest
			if err := json.Unmarshal(m.Data, &req); err != nil || req.Plan == "" {
				reply(m, DiffReply{Error: "want {\"plan\": \"…\", \"model\": \"…\"}", Code: string(commands.CodeInvalid)})
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			rep, err := DiffPlan(ctx, wh, proj, req.Plan, req.Model)
			if err != nil {
				rep.replyError(err)
			}
			reply(m, rep)
		}()
	})
	if err != nil {
		_ = q.Unsubscribe()
		_ = v.Unsubscribe()
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		_ = q.Unsubscribe()
		_ = v.Unsubscribe()
		_ = df.Unsubscribe()
		return nil, err
	}
	return func() { _ = q.Unsubscribe(); _ = v.Unsubscribe(); _ = df.Unsubscribe() }, nil
}
