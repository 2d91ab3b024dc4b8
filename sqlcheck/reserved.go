package sqlcheck

import (
	"strings"

	"github.com/tidemark/tidemark/models"
)

// Reserved reports whether name is a system or catalog name
// (models.Reserved: a name that starts with pg_, duckdb_, sqlite_ or
// pragma_, or an engine's or tidemark's own schema: information_schema,
// main, temp, system, memory, public, tidemark, …). Model SQL never reads
// a table of such a name, not even a declared upstream model's or its own
// CTE's, so that no scoping mistake can reach the catalog behind it; the
// engine refuses such a name as a model's or an environment's too. A
// name holding dots (a schema-qualified model's, "sushi.orders", read as
// one quoted identifier) is reserved when any of its parts is
// ("tidemark.x", "x.pg_class").
func Reserved(name string) bool {
	for _, part := range strings.Split(name, ".") {
		if models.Reserved(part) != "" {
			return true
		}
	}
	return false
}
