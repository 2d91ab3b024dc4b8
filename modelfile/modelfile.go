// Package modelfile is the one YAML/JSON reader of tidemark: the only
// importer of goccy/go-yaml.
//
// Its job is to turn the files people write into checked values: model files
// (the YAML a data team keeps next to its jobs, listing each model's
// definition; `tidemark apply -f FILE` registers them) through Load and
// Parse, and the generic nodes scenario files are read from through Read and
// the Node and Map accessors.
//
// Invariants: every problem in a file is an *Error (errors.Is(err,
// ErrInvalid)) naming the file, the line when known and the field path, with
// byte-stable messages (tests pin them); duplicate and unknown keys are
// refused; it reads nothing but the file it is given and never panics on
// input.
//
// It also reads a SQLMesh project's config.yaml (ReadSQLMeshConfig) for
// package sqlmesh/project, and names a definition by its content
// (ContentVersion) for both.
//
// Importers: cmd/tidemark (apply), scenario and sqlmesh/project.
package modelfile

import (
	"errors"
	"fmt"
)

// Error is a problem in a file: which file, where (line, when known) and
// which field (e.g. models[0].cron, or steps[3].promote.plan).
type Error struct {
	File string
	Line int
	Path string
	Msg  string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Path, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// ErrInvalid is matched by every *Error.
var ErrInvalid = errors.New("modelfile: invalid file")

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
