package server

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
// serve records its layout in the work consumer's metadata (LayoutKey),
// which workers read when they bind to it (cmd/tidemark's worker).

// LayoutKey is the work consumer's metadata key naming serve's warehouse
// engine: "postgres", or "none".
const LayoutKey = "tidemark.warehouse"

// LayoutHelp names the supported layouts, for refusals.
const LayoutHelp = "supported layouts: `tidemark serve --builtin-worker [--warehouse FILE.duckdb | postgres://…]` " +
	"(one process computes and serves; --work-concurrency scales its pool), or " +
	"`tidemark serve --warehouse postgres://…` with any number of `tidemark worker --warehouse postgres://…` " +
	"on the same database (serve swaps the views), or serve without a warehouse and `tidemark worker --exec` (models without SQL); see README \"Layouts\""

// IsDuckDB reports whether dsn names a DuckDB warehouse (a file, or in memory).
func IsDuckDB(dsn string) bool {
	return dsn != "" && dsn != "none" && !warehouse.IsPostgresDSN(dsn)
}

// Layout checks serve's warehouse and worker settings: nil, or why the
// layout cannot work.
func Layout(builtin bool, dsn string) error {
	if !builtin && IsDuckDB(dsn) {
		return fmt.Errorf("--warehouse %s without --builtin-worker: serve would own this DuckDB file (one process owns a DuckDB file), "+
			"so no `tidemark worker` could open it to compute the SQL models and nothing would ever fill it; "+
			"add --builtin-worker to compute in serve, or use a postgres:// warehouse shared with the workers\n%s", dsn, LayoutHelp)
	}
	return nil
}

// layoutName is what serve without the built-in worker records in the
// work consumer's metadata: "postgres" or "none" (Layout refused a DuckDB
// file).
func layoutName(dsn string) string {
	if warehouse.IsPostgresDSN(dsn) {
		return "postgres"
	}
	return "none"
}
