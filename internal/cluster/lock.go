package cluster

import (
	"errors"
	"fmt"
	"path/filepath"

	"allot.dev/allot/internal/pidlock"
)

// lockDataDir takes an exclusive, non-blocking lock on DIR/lock so that two
// `allot up` never share a data dir (etcd would block forever on its own
// database lock). The lock goes with the process.
func lockDataDir(dir string) (release func(), err error) {
	release, err = pidlock.Lock(filepath.Join(dir, "lock"))
	var held *pidlock.HeldError
	switch {
	case errors.As(err, &held):
		pid := held.PID
		if pid == "" {
			pid = "unknown"
		}
		return nil, fmt.Errorf("data dir %s is in use by another allot process (pid %s)", dir, pid)
	case err != nil:
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	return release, nil
}
