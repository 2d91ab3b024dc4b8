package sqlmesh

import (
	"errors"
	"fmt"
)

// Error is a problem in a model or audit file: which file, where (line, and
// column when it helps) and which property (e.g. kind, or audits).
type Error struct {
	File     string
	Line     int
	Col      int
	Property string
	Msg      string
}

// Error formats as file:line[:col]: property: message.
func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
		if e.Col > 0 {
			loc = fmt.Sprintf("%s:%d", loc, e.Col)
		}
	}
	if e.Property != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Property, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// ErrInvalid is matched by every *Error.
var ErrInvalid = errors.New("sqlmesh: invalid file")

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
