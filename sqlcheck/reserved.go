package sqlcheck

import "strings"

// reservedPrefixes and reservedNames are the names of the engines' own
// catalogs, schemas, tables and views that a bare name can reach: DuckDB's
// system.main views (duckdb_tables, sqlite_master, pragma_database_list),
// its pg_catalog views (pg_class, pg_settings), Postgres's pg_catalog
// (pg_authid, pg_statistic), and the catalogs and schemas themselves.
var (
	reservedPrefixes = []string{"pg_", "duckdb_", "sqlite_", "pragma_"}
	reservedNames    = []string{"information_schema", "main", "temp", "system", "memory", "public", "tidemark"}
)

// Reserved reports whether name (compared case-insensitively: DuckDB
// resolves even quoted identifiers so) is a system or catalog name: a name
// that starts with pg_, duckdb_, sqlite_ or pragma_, or is one of
// information_schema, main, temp, system, memory, public, tidemark. Model
// SQL never reads a table of such a name, not even a declared upstream
// model's or its own CTE's, so that no scoping mistake can reach the
// catalog behind it; a model should not be named so either.
func Reserved(name string) bool {
	n := strings.ToLower(name)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	for _, r := range reservedNames {
		if n == r {
			return true
		}
	}
	return false
}
