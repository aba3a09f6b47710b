package localbackend

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the name of the lock `molt serve` holds in its data directory.
const LockFile = "molt.lock"

// ErrLocked is returned by LockDataDir when another process holds the lock.
var ErrLocked = errors.New("data directory in use")

// LockDataDir takes the exclusive lock of the data directory dir (created 0700
// if missing): an advisory lock (flock) on dir/molt.lock, which also records
// the holder's pid. The lock is the process's: the kernel drops it when the
// process ends, however it ends, so a SIGKILLed `molt serve` never leaves a
// stale lock behind. While it is held, every claim in the store is this
// process's own, and a claim found at start belongs to a previous incarnation
// that is gone (app.App.Recover). A second `molt serve` on the same directory
// gets ErrLocked with the holder's pid. unlock releases it.
func LockDataDir(dir string) (unlock func() error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b[:n]))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w: %s is used by another molt serve (pid %s); stop it or choose another --data",
				ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return f.Close()
	}, nil
}
