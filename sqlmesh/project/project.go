// Package project turns a SQLMesh project (a directory of models/*.sql,
// audits/*.sql, seeds/*.csv and a config.yaml) or one SQLMesh model file
// into tidemark registrations: one commands.RegisterSnapshot per model, in
// dependency order, each version named by its content (so an edited file,
// or an edited seed CSV, is a new version).
//
// Files are read by package sqlmesh (the MODEL and AUDIT blocks), the
// config by package modelfile (the one YAML reader); a model's SQL is read
// by the engine's parser (sqlcheck.Tables) for the tables it reads, which
// must all be models of the project: they are its depends_on, and a
// schema-qualified reference (shop.orders) is rewritten in the registered
// SQL to the one quoted identifier "shop.orders". Every definition goes
// through models.Definition.Validate (Macros is models.MacrosSQLMesh, so
// any macro outside SQLMesh's predefined ones is refused there).
//
// Invariants: every problem is an *Error naming the file, the line and the
// SQLMesh property (errors.Is(err, ErrInvalid) and models.ErrInvalid);
// the problems of every file are reported together (errors.Join); what
// tidemark does not read (unknown properties, owner, description,
// columns, config keys other than model_defaults' start, cron, dialect,
// interval_unit and owner) never enters a version and is reported in
// Project.Notes; a model whose enabled is false is not loaded (as SQLMesh
// loads none), a note saying so; it reads only the files of the project
// and never writes.
//
// Importers: cmd/tidemark (apply -f DIR).
package project

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/sqlmesh"
)

// Project is a loaded SQLMesh project.
type Project struct {
	// Root is the path loaded: the project's directory, or a model file.
	Root string
	// Models are the project's models, each after the models it reads.
	Models []Model
	// Notes are what the project says that tidemark does not read, each
	// with its file and line: unknown properties, config keys, kind
	// settings, standalone audits, ignored files.
	Notes []Note
}

// Model is one model of a project, ready to register.
type Model struct {
	// Register is the registration (without Meta): Model is the MODEL's
	// name (schema.model), Version its content version
	// (modelfile.ContentVersion), Macros models.MacrosSQLMesh, DependsOn
	// the project's models its query reads, SQL its query with each
	// reference to a model rewritten to "schema.model".
	Register commands.RegisterSnapshot
	// File is the model's file; Line where its MODEL block starts,
	// QueryLine where its query does (0 for a seed).
	File            string
	Line, QueryLine int
	// Owner, Description and Columns are kept as the file gives them;
	// they are no part of a tidemark version (the fingerprint ignores
	// them), so changing them alone registers nothing new.
	Owner, Description string
	Columns            []sqlmesh.Column
	// SeedFile is the CSV of a SEED model (its path resolved).
	SeedFile string

	at *entry // where its properties are (Place)
}

// Note is something a project says that tidemark does not read.
type Note struct {
	File     string
	Line     int // 0: the whole file
	Property string
	Msg      string
}

// String formats as file:line: property: message.
func (n Note) String() string { return format(n.File, n.Line, n.Property, n.Msg) }

// Error is a problem of a project: its file, line and SQLMesh property
// (name, kind, start, query, audits, depends_on, dialect, …).
type Error struct {
	File     string
	Line     int
	Property string
	Msg      string
}

// ErrInvalid is matched by every *Error.
var ErrInvalid = errors.New("project: invalid SQLMesh project")

// Error formats as file:line: property: message.
func (e *Error) Error() string { return format(e.File, e.Line, e.Property, e.Msg) }

// Is makes errors.Is(err, ErrInvalid) and errors.Is(err,
// models.ErrInvalid) true: a project's problem is an invalid definition.
func (e *Error) Is(target error) bool { return target == ErrInvalid || target == models.ErrInvalid }

func format(file string, line int, property, msg string) string {
	loc := file
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", file, line)
	}
	if property != "" {
		return fmt.Sprintf("%s: %s: %s", loc, property, msg)
	}
	return fmt.Sprintf("%s: %s", loc, msg)
}

// fromSQLMesh is a package sqlmesh error as an *Error (other errors as
// they are).
func fromSQLMesh(err error) error {
	var e *sqlmesh.Error
	if errors.As(err, &e) {
		msg := e.Msg
		if e.Col > 0 {
			msg = fmt.Sprintf("%s (column %d)", msg, e.Col)
		}
		return &Error{File: e.File, Line: e.Line, Property: e.Property, Msg: msg}
	}
	return err
}

// lineIn is the line of byte offset off of text, counted from first
// (text's first line).
func lineIn(text string, off, first int) int {
	off = min(max(off, 0), len(text))
	return first + strings.Count(text[:off], "\n")
}
