// Package pidlock takes exclusive locks on files that name their holder:
// one allot process per data dir, one node agent per plugins registry
// dir. The lock is a flock on the file, so it goes with its holder's
// process (a kill -9 frees it) and a second open of the file, in this
// process or another, does not get it.
package pidlock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// HeldError is Lock's error when another holder has the lock.
type HeldError struct {
	Path string
	// PID is the holder's process ID as it wrote it, "" when unknown.
	PID string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is locked by %s", e.Path, e.Holder())
}

// Holder names the holder: "pid N", or "another process".
func (e *HeldError) Holder() string {
	if e.PID == "" {
		return "another process"
	}
	return "pid " + e.PID
}

// Lock takes path (created if missing) without waiting and writes this
// process's PID into it. It returns a *HeldError when another holder has
// it. release (idempotent) gives it up.
func Lock(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			data, _ := os.ReadFile(path)
			return nil, &HeldError{Path: path, PID: strings.TrimSpace(string(data))}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = f.Close() }) }, nil
}
