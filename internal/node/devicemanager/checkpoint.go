package devicemanager

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

type checkpointFile struct {
	Data     json.RawMessage `json:"data"`
	Checksum string          `json:"checksum"`
}

func (m *Manager) checkpointPath() string {
	return filepath.Join(m.opts.CheckpointDir, CheckpointFile)
}

func checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func readCheckpoint(path string) (checkpointData, error) {
	var f checkpointFile
	if err := atomicfile.ReadJSON(path, &f); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return checkpointData{}, nil
		}
		return checkpointData{}, fmt.Errorf("read checkpoint: %w", err)
	}
	if checksum(f.Data) != f.Checksum {
		return checkpointData{}, fmt.Errorf("read checkpoint %s: %w", path, ErrCorruptCheckpoint)
	}
	var d checkpointData
	if err := json.Unmarshal(f.Data, &d); err != nil {
		return checkpointData{}, fmt.Errorf("decode checkpoint: %w: %w", ErrCorruptCheckpoint, err)
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
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := os.MkdirAll(m.opts.CheckpointDir, 0o750); err != nil {
		return fmt.Errorf("create checkpoint dir: %w", err)
	}
	file, err := json.Marshal(checkpointFile{Data: data, Checksum: checksum(data)})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(m.checkpointPath(), file, 0o600); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
