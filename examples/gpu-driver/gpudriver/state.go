package gpudriver

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"allot.dev/allot/pkg/driver/kubeletplugin"
)

// stateFile appends one line per claim prepared or unprepared, for tests
// that count how often the driver really acted.
type stateFile struct {
	mu   sync.Mutex
	path string
}

// record appends "OP UID NS/NAME[ ID,ID...]" (the instance IDs a
// prepare gave the claim); a nil stateFile does nothing.
func (s *stateFile) record(op string, c kubeletplugin.Claim, ids ...string) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open state file: %w", err)
	}
	line := fmt.Sprintf("%s %s %s/%s", op, c.UID, c.Namespace, c.Name)
	if len(ids) > 0 {
		line += " " + strings.Join(ids, ",")
	}
	_, err = fmt.Fprintln(f, line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to state file: %w", err)
	}
	return nil
}
