package natsnode

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestDataDirLocked: a second embedded node on a data dir a node runs on
// fails at once, naming the dir and the holder's pid; once the first has
// closed, a third starts. The lock is flock(2), per open file
// description, so two nodes of one process conflict too.
func TestDataDirLocked(t *testing.T) {
	if !lockSupported() {
		t.Skip("no flock on " + runtime.GOOS)
	}
	dir := filepath.Join(t.TempDir(), "data")
	first, err := Start(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Start(t.Context(), Config{DataDir: dir})
	if err == nil {
		second.Close()
		t.Fatal("a second node started on a data dir in use")
	}
	var locked *LockedError
	if !errors.As(err, &locked) || !errors.Is(err, ErrLocked) || locked.PID != os.Getpid() ||
		!strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second node: %v", err)
	}
	first.Close()
	third, err := Start(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	third.Close()
}

// TestDataDirLockedAcrossProcesses: the lock holds against another
// process (flock(1) from util-linux, when installed), and the kernel
// releases it when the holder ends.
func TestDataDirLockedAcrossProcesses(t *testing.T) {
	path, err := exec.LookPath("flock")
	if err != nil || !lockSupported() {
		t.Skip("no flock(1)")
	}
	dir := t.TempDir()
	l, err := LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--nonblock", "--conflict-exit-code", "9", filepath.Join(dir, LockFile), "true").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 9 {
		t.Fatalf("another process took the lock: %v %s", err, out)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(path, "--nonblock", filepath.Join(dir, LockFile), "true").CombinedOutput(); err != nil {
		t.Fatalf("the lock is still held after Unlock: %v %s", err, out)
	}
}

func lockSupported() bool { return !errors.Is(errWouldBlock, errNoFlock) }
