package sqlcheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// parsed is json_serialize_sql's answer.
type parsed struct {
	Error        bool   `json:"error"`
	ErrorType    string `json:"error_type"`
	ErrorMessage string `json:"error_message"`
	Position     string `json:"position"`
	Statements   []any  `json:"statements"`
}

// parserError is DuckDB's parser refusing the text.
type parserError struct {
	Type, Message string
	Position      int // byte offset in the parsed text; -1: unknown
}

func (e *parserError) Error() string { return e.Message }

// decodeParsed reads json_serialize_sql's answer (numbers kept exact: an
// unknown location is 2^64-1).
func decodeParsed(s string) (*parsed, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var p parsed
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("sqlcheck: json_serialize_sql's answer: %w", err)
	}
	if p.Error {
		pos, err := strconv.Atoi(p.Position)
		if err != nil {
			pos = -1
		}
		return nil, &parserError{Type: p.ErrorType, Message: p.ErrorMessage, Position: pos}
	}
	return &p, nil
}

// tableFunctions are the table functions a model may call: they generate
// data and read nothing.
var tableFunctions = map[string]bool{"range": true, "generate_series": true, "unnest": true}

// deniedFunctions are scalar functions that read or change the server's
// state (DuckDB's, and Postgres's for a Postgres warehouse), refused though
// DuckDB may bind them.
var deniedFunctions = map[string]bool{
	"current_setting": true, "set_config": true, "getvariable": true, "getenv": true,
	"nextval": true, "currval": true, "setval": true, "lastval": true, "setseed": true,
	"query": true, "query_table": true, "json_execute_serialized_sql": true,
	"query_to_xml": true, "query_to_xml_and_xmlschema": true, "query_to_xmlschema": true,
	"table_to_xml": true, "table_to_xml_and_xmlschema": true, "cursor_to_xml": true,
	"schema_to_xml": true, "database_to_xml": true, "txid_current": true,
	"sleep_ms": true,
}

// MaxSize bounds a size argument of the functions sizedArgs names.
const MaxSize = 10000

// sizedArgs are the scalar functions whose result's size an argument
// gives (by index; nil: every argument): DuckDB allocates such a result
// outside its memory_limit and cannot interrupt the allocation, so
// len(range(0, 600000000)) or repeat('x', 4000000000) takes gigabytes past
// any limit. Each size argument must be an integer literal of at most
// MaxSize; a size computed from data is refused.
var sizedArgs = map[string][]int{
	"range": nil, "generate_series": nil, // the list forms; FROM range(…) streams
	"repeat": {1}, "lpad": {1}, "rpad": {1}, "list_resize": {1}, "array_resize": {1},
	"to_base": {2}, "bitstring": {1}, "equi_width_bins": {2},
}

// loopFunctions fold a lambda over a list: an accumulator that doubles
// each step (acc || acc) grows past any memory limit in a few dozen steps.
var loopFunctions = map[string]bool{"list_reduce": true, "array_reduce": true, "reduce": true}

// sized is why the call v of name is refused for the size of what it
// allocates, or "".
func (w *walker) sized(v map[string]any, name string) string {
	name = strings.ToLower(name)
	args, _ := v["children"].([]any)
	if loopFunctions[name] {
		return fmt.Sprintf("calls %s, which may grow its accumulator without bound outside DuckDB's memory limit: write it with a join or an aggregate", name)
	}
	if name == "format" || name == "printf" {
		if len(args) == 0 {
			return ""
		}
		f, ok := constString(args[0])
		if !ok {
			return fmt.Sprintf("calls %s with a computed format: its format must be a string literal (a width in it sizes the result)", name)
		}
		if msg := formatWidths(f); msg != "" {
			return fmt.Sprintf("calls %s with the format %q: %s", name, f, msg)
		}
		return ""
	}
	idx, ok := sizedArgs[name]
	if !ok {
		return ""
	}
	if idx == nil {
		for i := range args {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		if i >= len(args) {
			continue
		}
		n, ok := constInt(args[i])
		if !ok {
			if name == "range" || name == "generate_series" {
				return fmt.Sprintf("calls %s as a list with a computed or non-integer bound: a list's size must be an integer literal of at most %d (to generate rows, use FROM %s(…), which streams)", name, MaxSize, name)
			}
			return fmt.Sprintf("calls %s with a computed size (argument %d): a size must be an integer literal of at most %d (DuckDB allocates it outside its memory limit)", name, i+1, MaxSize)
		}
		if n > MaxSize || n < -MaxSize {
			return fmt.Sprintf("calls %s with the size %d (argument %d): at most %d (DuckDB allocates it outside its memory limit)", name, n, i+1, MaxSize)
		}
	}
	return ""
}

// constInt is v's value if v is an integer literal (NULL: 0).
func constInt(v any) (int64, bool) {
	c, ok := v.(map[string]any)
	if !ok || str(c, "class") != "CONSTANT" {
		return 0, false
	}
	val, _ := c["value"].(map[string]any)
	typ, _ := val["type"].(map[string]any)
	switch str(typ, "id") {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT":
	default:
		return 0, false
	}
	if null, _ := val["is_null"].(bool); null {
		return 0, true
	}
	n, ok := val["value"].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, false
	}
	return i, true
}

// constString is v's value if v is a string literal.
func constString(v any) (string, bool) {
	c, ok := v.(map[string]any)
	if !ok || str(c, "class") != "CONSTANT" {
		return "", false
	}
	val, _ := c["value"].(map[string]any)
	typ, _ := val["type"].(map[string]any)
	if str(typ, "id") != "VARCHAR" {
		return "", false
	}
	s, ok := val["value"].(string)
	return s, ok
}

// formatWidths is why format string f may size its result without bound,
// or "": a width given by an argument ('*' in printf, a nested {} in
// format) or a number above MaxSize.
func formatWidths(f string) string {
	if strings.Contains(f, "*") {
		return "a width given by an argument ('*') is refused"
	}
	depth := 0
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case '{':
			if depth == 0 && i+1 < len(f) && f[i+1] == '{' {
				i++
				continue
			}
			if depth++; depth > 1 {
				return "a width given by an argument (a nested {}) is refused"
			}
		case '}':
			if depth > 0 {
				depth--
			}
		}
	}
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] >= '0' && f[i] <= '9' {
			if n = n*10 + int(f[i]-'0'); n > MaxSize {
				return fmt.Sprintf("a width above %d is refused", MaxSize)
			}
			continue
		}
		n = 0
	}
	return ""
}

// deniedPrefixes are families of such functions (pg_read_file, lo_export,
// dblink_exec, …).
var deniedPrefixes = []string{"pg_", "lo_", "dblink"}

func deniedFunction(name string) bool {
	name = strings.ToLower(name)
	if deniedFunctions[name] {
		return true
	}
	for _, p := range deniedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// tableRefs are the FROM items a model may use; any other (SHOW_REF of
// DESCRIBE/SUMMARIZE, PIVOT, which runs a query while binding, …) is
// refused.
var tableRefs = map[string]bool{"BASE_TABLE": true, "JOIN": true, "SUBQUERY": true, "TABLE_FUNCTION": true, "EXPRESSION_LIST": true, "EMPTY": true}

// queryNodes are the query nodes a SELECT statement is made of.
var queryNodes = map[string]bool{"SELECT_NODE": true, "SET_OPERATION_NODE": true, "RECURSIVE_CTE_NODE": true, "CTE_NODE": true}

// walker checks a parsed statement: every table reference, table function,
// function and parameter in it. The first refusal stops it.
type walker struct {
	deps map[string]bool
	// audit: the statement is a custom audit's, whose only table is
	// warehouse.ThisModel (@this_model).
	audit bool
	err   *Error
	loc   int // the refusal's byte offset in the parsed text (-1: unknown)
	// acc is the weight of the query being walked (the statement's, or a
	// CTE's body): 1, plus each table it reads, a CTE counting its weight.
	acc *int
	// collect, when set, receives every table read by name that is not a
	// CTE in scope (Tables), Start its query_location; nothing is
	// refused.
	collect *[]TableRef
}

// MaxExpansion bounds a statement's expanded size, and each CTE's: its
// weight, 1 plus, for every table reference in it (subqueries included),
// the weight of the CTE it names (an upstream model, or a recursive CTE
// in its own body, weighs 1). The engines bind (and DuckDB inlines) a CTE
// at each reference, so a chain of CTEs each reading the previous one
// twice is exponential to bind in under 1 KB of SQL; this refuses it.
const MaxExpansion = 1000

// cte is a CTE in scope.
type cte struct {
	name   string
	weight int
}

// add counts n into the weight of the query being walked (saturating).
func (w *walker) add(n int) {
	if w.acc != nil {
		*w.acc = min(*w.acc+n, MaxExpansion+1)
	}
}

func (w *walker) refuse(v map[string]any, format string, args ...any) {
	w.err = &Error{Field: "sql", Msg: fmt.Sprintf(format, args...)}
	w.loc = location(v)
}

// location is a node's query_location (-1 when unknown).
func location(v map[string]any) int {
	n, ok := v["query_location"].(json.Number)
	if !ok {
		return -1
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < 0 || i > 1<<31 {
		return -1
	}
	return int(i)
}

func str(v map[string]any, k string) string {
	s, _ := v[k].(string)
	return s
}

// inScope is the innermost CTE of scope named name (nil: none).
func inScope(scope []cte, name string) *cte {
	for i := len(scope) - 1; i >= 0; i-- {
		if scope[i].name == name {
			return &scope[i]
		}
	}
	return nil
}

// walk visits v with scope, the CTEs visible there.
//
// Scope is the engines' (DuckDB's and Postgres's): the body of a WITH's
// i-th CTE sees the CTEs of the enclosing scopes and the WITH's CTEs before
// it, never itself nor a later one; the query under the WITH sees them all;
// a subquery sees its enclosing query's scope. A recursive CTE (WITH
// RECURSIVE r AS (a UNION b), a RECURSIVE_CTE_NODE named r) sees itself in
// its recursive term b only.
func (w *walker) walk(v any, scope []cte) {
	if w.err != nil {
		return
	}
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			w.walk(x, scope)
		}
	case map[string]any:
		if ctes, ok := v["cte_map"].(map[string]any); ok {
			list, _ := ctes["map"].([]any)
			if scope = w.ctes(list, scope); w.err != nil {
				return
			}
		}
		if !w.node(v, scope) {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(v)) { // the first refusal, always the same
			switch {
			case k == "cte_map": // walked by ctes, each in its own scope
				continue
			case k == "function" && str(v, "type") == "TABLE_FUNCTION":
				// range and generate_series in FROM stream their rows and
				// honour the timeout: only their arguments are checked.
				if f, ok := v[k].(map[string]any); ok {
					for _, fk := range slices.Sorted(maps.Keys(f)) {
						w.walk(f[fk], scope)
					}
				}
			case k == "right" && str(v, "type") == "RECURSIVE_CTE_NODE":
				w.walk(v[k], append(slices.Clip(scope), cte{name: str(v, "cte_name"), weight: 1}))
			default:
				w.walk(v[k], scope)
			}
			if w.err != nil {
				return
			}
		}
	}
}

// ctes walks the CTEs of one WITH, each in the scope it sees, and returns
// the scope of the query under the WITH.
func (w *walker) ctes(list []any, scope []cte) []cte {
	scope = slices.Clip(scope)
	for _, e := range list {
		e, ok := e.(map[string]any)
		if !ok {
			continue
		}
		name := str(e, "key")
		if Reserved(name) && w.collect == nil {
			w.refuse(nil, "defines the CTE %q, a reserved name (a system catalog's): name it otherwise", name)
			return nil
		}
		outer, weight := w.acc, 1
		w.acc = &weight
		w.walk(e["value"], scope) // scope: the CTEs before it, not itself
		w.acc = outer
		if w.err != nil {
			return nil
		}
		if weight > MaxExpansion && w.collect == nil {
			w.refuse(nil, "expands too much: its CTE %q reads CTEs that read CTEs… more than %d tables in all once expanded (the engines bind a CTE at each reference)", name, MaxExpansion)
			return nil
		}
		scope = append(scope, cte{name: name, weight: weight})
	}
	return scope
}

// node checks one JSON object of the tree; false stops the walk.
func (w *walker) node(v map[string]any, scope []cte) bool {
	typ := str(v, "type")
	if w.collect != nil {
		if _, isRef := v["sample"]; isRef && typ == "BASE_TABLE" {
			name, schema, catalog := str(v, "table_name"), str(v, "schema_name"), str(v, "catalog_name")
			if schema != "" || catalog != "" || inScope(scope, name) == nil {
				*w.collect = append(*w.collect, TableRef{Catalog: catalog, Schema: schema, Name: name, Alias: str(v, "alias"), Start: location(v)})
			}
		}
		return true
	}
	if class := str(v, "class"); class != "" { // an expression
		switch class {
		case "FUNCTION":
			name := str(v, "function_name")
			// The parser itself names some in main ([1, 2] is main.list_value).
			if schema := str(v, "schema"); (schema != "" && schema != "main") || str(v, "catalog") != "" {
				w.refuse(v, "calls %s: a model calls functions by their plain names", strings.Trim(str(v, "catalog")+"."+schema, ".")+"."+name)
				return false
			}
			if deniedFunction(name) {
				w.refuse(v, "calls %s, which reads or changes the server's state", name)
				return false
			}
			if msg := w.sized(v, name); msg != "" {
				w.refuse(v, "%s", msg)
				return false
			}
		case "PARAMETER":
			if id := str(v, "identifier"); id != "1" && id != "2" {
				w.refuse(v, "has the parameter $%s: use @start_ts and @end_ts", id)
				return false
			}
		}
		return true
	}
	if _, isRef := v["sample"]; isRef && typ != "" && !strings.HasSuffix(typ, "_NODE") { // a FROM item
		if !tableRefs[typ] {
			w.refuse(v, "reads a %s in FROM: a model reads its upstream models, its CTEs and %s only", strings.ToLower(typ), allowedFunctions())
			return false
		}
		switch typ {
		case "BASE_TABLE":
			name, schema, catalog := str(v, "table_name"), str(v, "schema_name"), str(v, "catalog_name")
			if schema != "" || catalog != "" {
				full := strings.Trim(catalog+"."+schema, ".") + "." + name
				if catalog == "" && w.deps[full] {
					w.refuse(v, "reads %s as a qualified table: a schema-qualified model is read as the one quoted identifier \"%s\"", full, full)
					return false
				}
				w.refuse(v, "reads %s: a model reads its upstream models by their plain names, never a qualified table (another environment, tidemark's own tables, a catalog)", full)
				return false
			}
			if at, ok := v["at_clause"]; ok && at != nil {
				w.refuse(v, "reads %s AT (…): time travel is not allowed", name)
				return false
			}
			if Reserved(name) {
				w.refuse(v, "reads %q, a reserved name (a system catalog's: pg_*, duckdb_*, sqlite_*, pragma_*, information_schema, main, …): a model reads no table of such a name", name)
				return false
			}
			if c := inScope(scope, name); c != nil {
				w.add(c.weight)
			} else if w.deps[name] {
				w.add(1)
			} else if w.audit {
				w.refuse(v, "reads %q, which is neither @this_model nor a CTE in scope there: an audit reads only the audited rows of its model (@this_model)", name)
				return false
			} else {
				w.refuse(v, "reads %q, which is neither a model it depends on (depends_on) nor a CTE in scope there (a CTE's body sees only the CTEs before it): declare the upstream model in depends_on", name)
				return false
			}
		case "TABLE_FUNCTION":
			f, _ := v["function"].(map[string]any)
			name := str(f, "function_name")
			if f == nil || str(f, "schema") != "" || str(f, "catalog") != "" || !tableFunctions[strings.ToLower(name)] {
				w.refuse(v, "calls the table function %s: a model may call only %s", name, allowedFunctions())
				return false
			}
		}
		return true
	}
	if strings.HasSuffix(typ, "_NODE") && !queryNodes[typ] {
		w.refuse(v, "has a %s: a model is one SELECT", strings.ToLower(typ))
		return false
	}
	return true
}

func allowedFunctions() string { return "the table functions range, generate_series and unnest" }
