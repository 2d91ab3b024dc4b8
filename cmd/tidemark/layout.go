package main

import (
	"fmt"

	"github.com/tidemark/tidemark/warehouse"
)

// The supported layouts of the data plane (README "Layouts"). One process
// owns a DuckDB file, so the process that computes into a DuckDB file must
// be the one that swaps its views and answers query and verify: serve,
// with its built-in worker (whose pool scales inside it, --work-concurrency).
// Several worker processes need a Postgres that serve shares with them.
//
//	serve flags                          tidemark worker            supported
//	--builtin-worker [--warehouse F.db]  none (none is given work)  yes: serve owns F (default DATA-DIR/warehouse.duckdb)
//	--builtin-worker --warehouse pg://   none                       yes: the built-in pool computes into Postgres
//	--builtin-worker --warehouse none    none                       yes, without SQL: SQL models are recorded, not computed (warned)
//	--warehouse pg://                    N × --warehouse pg://      yes: the workers compute, serve swaps the views
//	(no --warehouse, or none)            N × --exec                 yes, without SQL: SQL models never computed (warned)
//	--warehouse F.db                     any                        no: nobody can compute into the file serve owns
//	any                                  --warehouse F.db           no: serve cannot open the worker's file, views never swapped
//	(no --warehouse, or none)            --warehouse pg://          no: serve has no warehouse, views never swapped
//
// serve records its layout in the work consumer's metadata (layoutKey),
// which workers read when they bind to it.

// layoutKey is the work consumer's metadata key naming serve's warehouse
// engine: "postgres", or "none".
const layoutKey = "tidemark.warehouse"

// layoutHelp names the supported layouts, for refusals.
const layoutHelp = "supported layouts: `tidemark serve --builtin-worker [--warehouse FILE.duckdb | postgres://…]` " +
	"(one process computes and serves; --work-concurrency scales its pool), or " +
	"`tidemark serve --warehouse postgres://…` with any number of `tidemark worker --warehouse postgres://…` " +
	"on the same database (serve swaps the views), or serve without a warehouse and `tidemark worker --exec` (models without SQL); see README \"Layouts\""

// isDuckDB reports whether dsn names a DuckDB warehouse (a file, or in memory).
func isDuckDB(dsn string) bool {
	return dsn != "" && dsn != "none" && !warehouse.IsPostgresDSN(dsn)
}

// serveLayout checks serve's flags: nil, or why the layout cannot work.
func serveLayout(builtin bool, dsn string) error {
	if !builtin && isDuckDB(dsn) {
		return fmt.Errorf("--warehouse %s without --builtin-worker: serve would own this DuckDB file (one process owns a DuckDB file), "+
			"so no `tidemark worker` could open it to compute the SQL models and nothing would ever fill it; "+
			"add --builtin-worker to compute in serve, or use a postgres:// warehouse shared with the workers\n%s", dsn, layoutHelp)
	}
	return nil
}

// serveWarehouse is what serve without the built-in worker records in the
// work consumer's metadata: "postgres" or "none" (serveLayout refused a
// DuckDB file).
func serveWarehouse(dsn string) string {
	if warehouse.IsPostgresDSN(dsn) {
		return "postgres"
	}
	return "none"
}

// workerLayout checks `tidemark worker --warehouse dsn` before it opens
// anything: nil, or why it cannot work.
func workerLayout(dsn string) error {
	if isDuckDB(dsn) {
		return fmt.Errorf("--warehouse %s: a DuckDB file is owned by the one process that opens it, so serve could not open it to swap "+
			"the environments' views onto the tables this worker computes, nor answer query and verify from them; "+
			"compute into DuckDB with `tidemark serve --builtin-worker --warehouse %s` instead (its --work-concurrency scales the pool), "+
			"or share a postgres:// warehouse between serve --warehouse and the workers\n%s", dsn, dsn, layoutHelp)
	}
	return nil
}

// workerServes checks a SQL worker against the layout serve recorded in
// the work consumer's metadata (meta): nil, or why its tables would never
// be served. A consumer without the key (an older serve) passes.
func workerServes(meta map[string]string, dsn string) error {
	got, ok := meta[layoutKey]
	if !ok || got == "postgres" || dsn == "" {
		return nil
	}
	what := "has no warehouse (--warehouse unset or none)"
	if got != "none" {
		what = "has a " + got + " warehouse"
	}
	return fmt.Errorf("--warehouse %s: serve %s, so the environments' views would never be swapped onto the tables this worker computes, "+
		"nor could query and verify read them; start serve with --warehouse %s (the same database as its workers)\n%s",
		warehouse.Redact(dsn), what, warehouse.Redact(dsn), layoutHelp)
}
