package sqlcheck

import "github.com/tidemark/tidemark/models"

// Reserved reports whether name is a system or catalog name
// (models.Reserved: a name that starts with pg_, duckdb_, sqlite_ or
// pragma_, or an engine's or tidemark's own schema: information_schema,
// main, temp, system, memory, public, tidemark, …). Model SQL never reads
// a table of such a name, not even a declared upstream model's or its own
// CTE's, so that no scoping mistake can reach the catalog behind it; the
// engine refuses such a name as a model's or an environment's too.
func Reserved(name string) bool { return models.Reserved(name) != "" }
