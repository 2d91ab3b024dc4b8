package natsnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the file in a data dir whose OS lock an embedded node holds
// while it runs there, with the holder's pid in it.
const LockFile = "serve.lock"

// ErrLocked is the error of a data dir another process (or another node
// of this one) holds: two JetStream servers on one store corrupt it.
var ErrLocked = errors.New("data dir in use")

// LockedError names the data dir and the pid holding it (0: unknown, the
// holder had not written it yet).
type LockedError struct {
	Dir string
	PID int
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("natsnode: the data dir %s is in use by %s (it holds the lock on %s): stop it first, "+
		"or give another --data-dir; two servers on one store would both write it", e.Dir, holder, filepath.Join(e.Dir, LockFile))
}

// Unwrap makes a LockedError match ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// errNoFlock stands for flock's answer where there is no flock(2).
var errNoFlock = errors.New("natsnode: no flock on this system")

// DirLock is a held lock on a data dir.
type DirLock struct {
	f *os.File
}

// LockDataDir takes the exclusive OS lock of dir (creating dir and its
// LockFile when absent) without waiting, and writes this process's pid
// into the file. A dir already locked, by another process or by another
// lock of this one, gives a *LockedError naming the holder's pid. The
// kernel releases the lock when the process ends, however it ends; the
// file stays (removing it would let two processes lock two files).
func LockDataDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("natsnode: data dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("natsnode: data dir lock: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &LockedError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("natsnode: lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("natsnode: data dir lock %s: %w", path, err)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock. It may be called more than once.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// readPID is the pid in a lock file, 0 when it holds none.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
