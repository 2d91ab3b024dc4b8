// Package sqlmesh reads SQLMesh model and audit files: the MODEL (…) and
// AUDIT (…) property blocks, parsed by a tokenizer of SQLMesh's property
// syntax (nested parentheses and brackets, single- and double-quoted strings
// with doubled-quote escapes, -- and /* */ comments, trailing commas,
// case-insensitive keywords), and the query that follows each block, kept
// verbatim with the line it starts on.
//
// The query is never tokenized here: the engine's own SQL parser reads it
// later. Only the property block is.
//
// Invariants: pure (no I/O beyond the bytes given, no tidemark imports);
// every problem is an *Error (errors.Is(err, ErrInvalid)) naming the file,
// the line (and the column where it helps) and the property; unknown
// properties are kept and listed, never dropped; it never panics on input
// (FuzzParseModel).
package sqlmesh
