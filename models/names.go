package models

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/tidemark/tidemark/events"
)

// MaxIdentBytes is the longest identifier both warehouse engines keep
// whole: Postgres cuts identifiers at 63 bytes (DuckDB keeps them).
const MaxIdentBytes = 63

// CheckWarehouseName checks a name that becomes a warehouse identifier as
// written (a model's name is its views' name, an environment's name is its
// schema's): a name (events.ValidName) of lower-case letters, digits, '_'
// and '-', at most MaxIdentBytes bytes. DuckDB folds identifiers' case, so
// "PROD" and "prod" would be one schema; Postgres cuts them at 63 bytes, so
// two long names would be one table. Names stored before this rule
// (events.ValidName) still decode: this check is for names being defined.
func CheckWarehouseName(field, v string) *FieldError {
	if v == "" {
		return named(field, "is required")
	}
	if !events.ValidName(v) {
		return named(field, "%q: use lower-case letters, digits, '_' and '-' (at most %d bytes)", v, MaxIdentBytes)
	}
	if strings.ToLower(v) != v {
		return named(field, "%q: use lower-case letters only: it names a warehouse identifier, and DuckDB folds case (%q would be the same one)", v, strings.ToLower(v))
	}
	if len(v) > MaxIdentBytes {
		return named(field, "%q is %d bytes: at most %d (a warehouse identifier; Postgres cuts longer ones)", v, len(v), MaxIdentBytes)
	}
	if why := Reserved(v); why != "" {
		return named(field, "%q is reserved: %s", v, why)
	}
	return nil
}

// CheckModelName checks a model's name being defined: a warehouse name
// (CheckWarehouseName), or a schema-qualified one, "<schema>.<model>"
// (SQLMesh's names), with exactly one '.' and each part a warehouse name
// (lower case, at most MaxIdentBytes bytes, not reserved: "tidemark.x"
// and "x.pg_class" are refused). The schema is part of the name: the
// model's view in environment env is <schema>__<env>.<model> (ViewOf),
// which must fit too (CheckViewSchema, at plan).
func CheckModelName(field, v string) *FieldError {
	schema, model, qualified := strings.Cut(v, ".")
	if !qualified {
		return CheckWarehouseName(field, v)
	}
	if !events.ValidModelName(v) {
		return named(field, "%q: a model's name is a name or schema.model, with one '.' between two names of lower-case letters, digits, '_' and '-'", v)
	}
	for _, part := range [...]struct{ what, v string }{{"schema", schema}, {"model", model}} {
		if fe := CheckWarehouseName(part.what, part.v); fe != nil {
			return named(field, "%q: its %s %s", v, part.what, fe.Detail)
		}
	}
	return nil
}

// ViewOf is the schema and name of the view of model in environment env:
// <env>.<model>, or <schema>__<env>.<model> for a schema-qualified model
// "<schema>.<model>" (warehouse.ViewOf computes the same).
func ViewOf(env, model string) (schema, view string) {
	if s, m, ok := strings.Cut(model, "."); ok {
		return s + "__" + env, m
	}
	return env, model
}

// CheckViewSchema checks that the schema of model's view in environment
// env (ViewOf: <schema>__<env> for a schema-qualified model) is a whole
// warehouse identifier: at most MaxIdentBytes bytes. Field names the
// model's place in the command ("versions").
func CheckViewSchema(field, env, model string) *FieldError {
	schema, _ := ViewOf(env, model)
	if len(schema) > MaxIdentBytes {
		return named(field, "%q in environment %q: its view's schema %q is %d bytes: at most %d (a warehouse identifier; Postgres cuts longer ones): use a shorter schema or environment name",
			model, env, schema, len(schema), MaxIdentBytes)
	}
	return nil
}

// reservedNames are the schemas (and, for a model, the names a query
// would resolve to a catalog's relation) the warehouse engines or
// tidemark itself own.
var reservedNames = map[string]string{
	"tidemark":           "tidemark's snapshot tables live in that schema",
	"tidemark_meta":      "tidemark's writer records live in that schema",
	"tidemark_sandbox":   "the Postgres sandbox role's own schema name",
	"main":               "DuckDB's default schema",
	"temp":               "DuckDB's and Postgres's temporary schema",
	"system":             "DuckDB's system catalog",
	"public":             "Postgres's default schema",
	"information_schema": "the SQL standard catalog",
	"pg_catalog":         "Postgres's catalog",
	"memory":             "DuckDB's in-memory catalog",
}

// reservedPrefixes are the prefixes of the engines' catalog relations and
// schemas a bare name can reach (pg_class, pg_authid, duckdb_tables,
// sqlite_master, pragma_database_list, pg_toast, …).
var reservedPrefixes = []string{"pg_", "duckdb_", "sqlite_", "pragma_"}

// Reserved says why name may not name a model or an environment, nor a
// table model SQL reads (an engine's or tidemark's own schema or catalog
// relation), or "". It compares case-insensitively: DuckDB resolves even
// quoted identifiers so.
func Reserved(name string) string {
	name = strings.ToLower(name)
	if why, ok := reservedNames[name]; ok {
		return why
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return "names starting with " + p + " are the warehouse engines' catalog"
		}
	}
	return ""
}

// The digests of table names: tableDigest hex digits after a model name
// that fits, longTableDigest after a cut one.
const (
	tableDigest     = 12
	longTableDigest = 24
)

// TableName is the warehouse table (in schema "tidemark") of a tidemark
// table id (a snapshot's Table, e.g. "events@v1"): the model's name, "__",
// and 12 hex digits of the id's SHA-256, the same for every snapshot that
// shares the table (forward-only versions), and a plain SQL identifier
// when the model's name is one. A schema-qualified model's '.' becomes
// "__" (sushi.orders@v1 is sushi__orders__…; the digest, of the id
// itself, keeps it apart from a model named sushi__orders). A name that would pass MaxIdentBytes (a
// model name of more than 49 bytes) keeps the first bytes of the model's
// name and 24 hex digits instead, so it is exactly MaxIdentBytes long (the
// hex digits cannot contain the "__" a shorter form has in their place:
// the two forms never meet). Pure: the data plane and decide's collision
// check (a version whose table name another table id already has is
// refused) compute the same name.
func TableName(tableID string) string {
	model := tableID
	if i := strings.IndexByte(tableID, '@'); i >= 0 {
		model = tableID[:i]
	}
	model = strings.ReplaceAll(model, ".", "__")
	sum := sha256.Sum256([]byte(tableID))
	digest := hex.EncodeToString(sum[:])
	if len(model)+2+tableDigest <= MaxIdentBytes {
		return model + "__" + digest[:tableDigest]
	}
	return model[:MaxIdentBytes-2-longTableDigest] + "__" + digest[:longTableDigest]
}
