package devicemanager

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"allot.dev/allot/internal/atomicfile"
)

// CheckpointFile is the checkpoint's name inside Options.CheckpointDir.
const CheckpointFile = "allot_device_manager_checkpoint"

// ErrCorruptCheckpoint means the checkpoint's checksum does not match:
// the Manager refuses to start rather than hand devices out twice.
var ErrCorruptCheckpoint = errors.New("device manager checkpoint is corrupt")

// checkpointData is what survives a restart.
type checkpointData struct {
	Resources   []resourceEntry   `json:"resources"`
	Allocations []allocationEntry `json:"allocations"`
}

// resourceEntry is a registered resource and the options its plugin
// registered with: after a restart, a container of a plugin that needs
// PreStartContainer is not started before the plugin is back.
type resourceEntry struct {
	Name             string `json:"name"`
	PreStartRequired bool   `json:"preStartRequired,omitempty"`
}

// allocationEntry is one container's devices of one resource, with the
// plugin's Allocate response (protobuf, base64 in JSON).
type allocationEntry struct {
	PodUID    string   `json:"podUID"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"deviceIDs"`
	Response  []byte   `json:"response,omitempty"`
}

func (m *Manager) checkpointPath() string {
	return filepath.Join(m.opts.CheckpointDir, CheckpointFile)
}

func readCheckpoint(path string) (checkpointData, error) {
	var d checkpointData
	if err := atomicfile.ReadChecksummed(path, &d); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return checkpointData{}, nil
		case errors.Is(err, atomicfile.ErrCorrupt):
			return checkpointData{}, fmt.Errorf("read checkpoint: %w: %w", ErrCorruptCheckpoint, err)
		}
		return checkpointData{}, fmt.Errorf("read checkpoint: %w", err)
	}
	return d, nil
}

// writeCheckpoint records the registered resources and the allocations.
// Called with admitMu held, so writes are ordered.
func (m *Manager) writeCheckpoint() error {
	entries, err := m.allocs.entries()
	if err != nil {
		return err
	}
	d := checkpointData{Allocations: entries}
	for _, r := range m.devices.snapshot() {
		d.Resources = append(d.Resources, resourceEntry{Name: r.Name, PreStartRequired: r.Options.PreStartRequired})
	}
	if err := atomicfile.WriteChecksummed(m.checkpointPath(), d); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
