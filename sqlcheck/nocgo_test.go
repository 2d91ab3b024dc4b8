//go:build !cgo

package sqlcheck

import (
	"errors"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/projections"
)

// TestNoParserRefusesSQL: a build without DuckDB refuses every model with
// SQL, saying why, and lets models without SQL through.
func TestNoParserRefusesSQL(t *testing.T) {
	err := Check(t.Context(), Model{Name: "m", SQL: "SELECT @start_ts AS ts", TimeColumn: "ts"}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Field != "sql" || !errors.Is(err, ErrNoParser) {
		t.Fatalf("got %v, want a refusal wrapping ErrNoParser", err)
	}
	check := ForEngine(func(fn func(*projections.State)) { fn(projections.New()) })
	var ce *commands.Error
	err = check(t.Context(), &commands.RegisterSnapshot{Model: "m", Version: "v1", SQL: "SELECT @start_ts AS ts", TimeColumn: "ts"})
	if !errors.As(err, &ce) || ce.Code != commands.CodeInvalid || ce.Field != "sql" {
		t.Fatalf("engine check: got %v", err)
	}
	if err := check(t.Context(), &commands.RegisterSnapshot{Model: "m", Version: "v1"}); err != nil {
		t.Fatalf("a model without SQL: %v", err)
	}
}
