package main

// The worker's side of the data plane's layouts (package server has the
// table of them, and serve's side).

import (
	"fmt"

	"github.com/tidemark/tidemark/server"
	"github.com/tidemark/tidemark/warehouse"
)

// workerLayout checks `tidemark worker --warehouse dsn` before it opens
// anything: nil, or why it cannot work.
func workerLayout(dsn string) error {
	if server.IsDuckDB(dsn) {
		return fmt.Errorf("--warehouse %s: a DuckDB file is owned by the one process that opens it, so serve could not open it to swap "+
			"the environments' views onto the tables this worker computes, nor answer query and verify from them; "+
			"compute into DuckDB with `tidemark serve --builtin-worker --warehouse %s` instead (its --work-concurrency scales the pool), "+
			"or share a postgres:// warehouse between serve --warehouse and the workers\n%s", dsn, dsn, server.LayoutHelp)
	}
	return nil
}

// workerServes checks a SQL worker against the layout serve recorded in
// the work consumer's metadata (meta): nil, or why its tables would never
// be served. A consumer without the key (an older serve) passes.
func workerServes(meta map[string]string, dsn string) error {
	got, ok := meta[server.LayoutKey]
	if !ok || got == "postgres" || dsn == "" {
		return nil
	}
	what := "has no warehouse (--warehouse unset or none)"
	if got != "none" {
		what = "has a " + got + " warehouse"
	}
	return fmt.Errorf("--warehouse %s: serve %s, so the environments' views would never be swapped onto the tables this worker computes, "+
		"nor could query and verify read them; start serve with --warehouse %s (the same database as its workers)\n%s",
		warehouse.Redact(dsn), what, warehouse.Redact(dsn), server.LayoutHelp)
}
