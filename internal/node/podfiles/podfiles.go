// Package podfiles is the on-disk layout of the node agent's root
// directory, and the pod checkpoint kept in it:
//
//	ROOT/pods/NAMESPACE_NAME_UID/                  one directory per pod
//	ROOT/pods/NAMESPACE_NAME_UID/checkpoint.json   what finished (Checkpoint)
//	ROOT/pods/NAMESPACE_NAME_UID/CONTAINER/N.log   stdout+stderr of attempt N
//
// Namespaces and names are DNS labels and subdomains, and UIDs hold no
// underscore, so a directory name splits back into its three parts.
//
// Writes are atomic (temporary file, fsync, rename, fsync of the
// directory): a reader, or an agent restarted after a crash, sees the old
// file or the new one, never half of one. Each pod's files have one writer,
// the pod's worker; the log server only reads.
package podfiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
)

// checkpointFile is the name of a pod's checkpoint in its directory.
const checkpointFile = "checkpoint.json"

// checkpointVersion is bumped when the format changes incompatibly.
const checkpointVersion = 1

// PodKey identifies a pod's directory.
type PodKey struct {
	Namespace, Name, UID string
}

// PodsDir is ROOT/pods.
func PodsDir(root string) string { return filepath.Join(root, "pods") }

// PodDir is ROOT/pods/NAMESPACE_NAME_UID.
func PodDir(root string, k PodKey) string {
	return filepath.Join(PodsDir(root), k.Namespace+"_"+k.Name+"_"+k.UID)
}

// LogPath is the log file of one attempt of a container.
func LogPath(root string, k PodKey, container string, attempt int) string {
	return filepath.Join(PodDir(root, k), container, strconv.Itoa(attempt)+".log")
}

// ListPods returns the keys of the pod directories under ROOT/pods; names
// that do not parse are skipped.
func ListPods(root string) ([]PodKey, error) {
	entries, err := os.ReadDir(PodsDir(root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pod directories: %w", err)
	}
	var out []PodKey
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			continue
		}
		out = append(out, PodKey{Namespace: parts[0], Name: parts[1], UID: parts[2]})
	}
	return out, nil
}

// RemovePod deletes a pod's directory: its logs and checkpoint.
func RemovePod(root string, k PodKey) error {
	if err := os.RemoveAll(PodDir(root, k)); err != nil {
		return fmt.Errorf("remove pod directory: %w", err)
	}
	return nil
}

// Checkpoint records what of a pod has finished, so that an agent restarted
// after its containers were removed (or after a reboot) neither runs a
// finished pod again nor repeats a completed init container.
type Checkpoint struct {
	Version int `json:"version"`
	// Phase is Succeeded or Failed once the pod has finished; empty while
	// it runs.
	Phase   corev1.PodPhase `json:"phase,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Message string          `json:"message,omitempty"`
	// Done holds, by container name, the last attempt of each container
	// that will not run again: init containers that succeeded, containers
	// whose exit the restart policy accepts.
	Done map[string]Finished `json:"done,omitempty"`
}

// Finished is the end of a container's last attempt.
type Finished struct {
	Attempt    int       `json:"attempt"`
	ExitCode   int32     `json:"exitCode"`
	Signal     int32     `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// LoadCheckpoint reads a pod's checkpoint; a missing file is an empty
// checkpoint.
func LoadCheckpoint(root string, k PodKey) (Checkpoint, error) {
	data, err := os.ReadFile(filepath.Join(PodDir(root, k), checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{Version: checkpointVersion}, nil
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read checkpoint: %w", err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return Checkpoint{}, fmt.Errorf("decode checkpoint of pod %s: %w", k.UID, err)
	}
	if cp.Version != checkpointVersion {
		return Checkpoint{}, fmt.Errorf("checkpoint of pod %s has version %d, want %d", k.UID, cp.Version, checkpointVersion)
	}
	return cp, nil
}

// SaveCheckpoint writes a pod's checkpoint atomically.
func SaveCheckpoint(root string, k PodKey, cp Checkpoint) error {
	cp.Version = checkpointVersion
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := WriteFileAtomic(filepath.Join(PodDir(root, k), checkpointFile), data, 0o600); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// WriteFileAtomic replaces path with data: it writes a temporary file in
// the same directory, syncs it, renames it over path and syncs the
// directory. Missing parent directories are created.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write temporary file: %w", err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("chmod temporary file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close temporary file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename temporary file: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}
