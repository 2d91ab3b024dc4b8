package sqlrun_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// `tidemark query` is bounded: 3,000,000 rows answer with the first
// 10,000 and say so; 100 MB of wide rows answer with what fits 4 MiB, and
// the reply always fits the server's maximum payload (before, both replies
// were dropped for their size and the client waited in vain).
func TestServeQueryBounded(t *testing.T) {
	wh := tempDuckDB(t)
	nc := jstest.Node(t).Conn()
	stop, err := sqlrun.Serve(nc, wh, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ask := func(sql string) (sqlrun.QueryReply, int) {
		t.Helper()
		body, _ := json.Marshal(sqlrun.QueryRequest{SQL: sql})
		msg, err := nc.Request(sqlrun.QuerySubject, body, 2*time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var rep sqlrun.QueryReply
		if err := json.Unmarshal(msg.Data, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Error != "" {
			t.Fatalf("%s: %s", sql, rep.Error)
		}
		return rep, len(msg.Data)
	}
	rep, _ := ask("SELECT i FROM range(3000000) AS t(i)")
	if !rep.Truncated || len(rep.Rows) != warehouse.DefaultLimits.Rows {
		t.Fatalf("3M rows: %d rows, truncated %v", len(rep.Rows), rep.Truncated)
	}
	rep, size := ask("SELECT repeat('x', 1000) AS s FROM range(100000)")
	if !rep.Truncated || size > warehouse.DefaultLimits.Bytes || int64(size) > nc.MaxPayload() || len(rep.Rows) < 4000 {
		t.Fatalf("wide rows: %d rows in %d bytes (max payload %d), truncated %v", len(rep.Rows), size, nc.MaxPayload(), rep.Truncated)
	}
	rep, _ = ask("SELECT 42 AS answer")
	if rep.Truncated || len(rep.Rows) != 1 {
		t.Fatalf("one row: %+v", rep)
	}
}

// The diff subject refuses a request without a plan as invalid, and an
// unknown plan as not_found, both with a reason.
func TestServeDiffRefusals(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		nc := jstest.Node(t).Conn()
		stop, err := sqlrun.Serve(nc, w.wh, w.e.Projection(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		for body, code := range map[string]string{`{}`: "invalid", `not json`: "invalid", `{"plan":"nope"}`: "not_found"} {
			msg, err := nc.Request(sqlrun.DiffSubject, []byte(body), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var rep sqlrun.DiffReply
			if err := json.Unmarshal(msg.Data, &rep); err != nil || rep.Code != code || rep.Error == "" {
				t.Errorf("%s: %+v %v, want code %s", body, rep, err, code)
			}
		}
	})
}
