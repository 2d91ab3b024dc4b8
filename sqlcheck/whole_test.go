//go:build cgo

package sqlcheck

import (
	"errors"
	"testing"
)

// A whole kind (full, view) has no time column: its SQL is checked
// without one; a model naming one must still produce it.
func TestWholeKindNoTimeColumn(t *testing.T) {
	if err := Check(t.Context(), Model{Name: "report", Kind: "full", SQL: "SELECT 1 AS n"}, nil); err != nil {
		t.Fatalf("no time column: %v", err)
	}
	err := Check(t.Context(), Model{Name: "report", SQL: "SELECT 1 AS n", TimeColumn: "ts"}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Field != "time_column" {
		t.Fatalf("a time column the query lacks: %v", err)
	}
}
