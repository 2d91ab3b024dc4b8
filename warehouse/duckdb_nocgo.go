//go:build !cgo

package warehouse

import "database/sql"

func openDuckDB(string) (*sql.DB, error) { return nil, ErrNoCgo }
