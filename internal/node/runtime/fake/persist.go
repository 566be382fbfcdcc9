package fake

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"allot.dev/allot/internal/atomicfile"
)

func (r *Runtime) file(id string) string { return filepath.Join(r.dir, id+".json") }

// save persists a container if a state dir is set; r.mu is held. The
// write is atomic but not fsynced: simulated containers need not survive
// a machine crash, and thousands of them are written.
func (r *Runtime) save(c *container) error {
	if r.dir == "" {
		return nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode container: %w", err)
	}
	if err := atomicfile.WriteFileNoSync(r.file(c.Status.ID), data, 0o644); err != nil {
		return fmt.Errorf("persist container: %w", err)
	}
	return nil
}

// load reads every persisted container of the state dir.
func (r *Runtime) load() error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("read state dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		var c container
		if err := atomicfile.ReadJSON(filepath.Join(r.dir, name), &c); err != nil {
			return fmt.Errorf("load fake container: %w", err)
		}
		if c.Status.ID+".json" != name {
			return fmt.Errorf("load fake container %s: id %q does not match the file", name, c.Status.ID)
		}
		r.containers[c.Status.ID] = &c
	}
	return nil
}
