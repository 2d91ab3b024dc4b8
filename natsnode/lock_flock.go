//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package natsnode

import (
	"errors"
	"os"
	"syscall"
)

// errWouldBlock is flock's answer for a lock held elsewhere.
var errWouldBlock = syscall.EWOULDBLOCK

// flock takes f's exclusive lock without waiting (flock(2): per open file
// description, so a second open of the file conflicts even in this
// process).
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
