//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package natsnode

import "os"

// errWouldBlock is never returned here.
var errWouldBlock = errNoFlock

// flock is a no-op where flock(2) is not available: the data dir is not
// locked there (docs/security.md).
func flock(*os.File) error { return nil }
