package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive, non-blocking lock on DIR/lock so that two
// `allot up` never share a data dir (etcd would block forever on its own
// database lock). The lock goes with the process.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			data, _ := os.ReadFile(path)
			holder := strings.TrimSpace(string(data))
			if holder == "" {
				holder = "unknown"
			}
			return nil, fmt.Errorf("data dir %s is in use by another allot process (pid %s)", dir, holder)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { _ = f.Close() }, nil
}
