package main

import (
	"github.com/spf13/pflag"
	"github.com/tidemark/tidemark/warehouse"
)

// warehouseFlags adds the warehouse's bounds to f (serve and worker):
// DuckDB's resources and the model timeout, and with query the limits of
// `tidemark query`'s answers (serve only: it answers them).
func warehouseFlags(f *pflag.FlagSet, o *warehouse.Options, query bool) {
	f.IntVar(&o.Threads, "warehouse-threads", 2, "DuckDB warehouse: worker threads")
	f.StringVar(&o.MemoryLimit, "warehouse-memory-limit", "2GB", "DuckDB warehouse: memory limit")
	f.StringVar(&o.MaxTempSize, "warehouse-max-temp-size", warehouse.DefaultMaxTempSize, "DuckDB warehouse: most disk its temporary files may take")
	f.DurationVar(&o.ModelTimeout, "model-timeout", warehouse.DefaultModelTimeout, "cancel one computation of a model (a batch's write, a table's creation, a verification) after this long, and record it failed")
	if query {
		f.IntVar(&o.QueryLimits.Rows, "query-max-rows", warehouse.DefaultLimits.Rows, "tidemark query: answer with at most this many rows (the reply says it was truncated)")
		f.IntVar(&o.QueryLimits.Bytes, "query-max-bytes", warehouse.DefaultLimits.Bytes, "tidemark query: answer with at most this many bytes of rows as JSON (and never more than the NATS maximum payload)")
	}
}
