package dra

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/internal/atomicfile"
)

// CheckpointFile is the checkpoint's name inside Options.CheckpointDir.
const CheckpointFile = "allot_dra_manager_checkpoint"

// ErrCorruptCheckpoint means the checkpoint's checksum does not match or
// it cannot be decoded: the Manager refuses to start rather than forget
// claims that must be unprepared.
var ErrCorruptCheckpoint = errors.New("DRA manager checkpoint is corrupt")

// checkpointData is what survives a restart.
type checkpointData struct {
	Claims []claimRecord `json:"claims"`
}

type checkpointFile struct {
	Data     json.RawMessage `json:"data"`
	Checksum string          `json:"checksum"`
}

func checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// loadClaimStore returns a store with the checkpoint at path (none yet:
// empty; path empty: memory only).
func loadClaimStore(path string) (*claimStore, error) {
	s := &claimStore{path: path, claims: map[types.UID]*claimRecord{}}
	if path == "" {
		return s, nil
	}
	var f checkpointFile
	if err := atomicfile.ReadJSON(path, &f); err != nil {
		var pathErr *fs.PathError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return s, nil
		case errors.As(err, &pathErr):
			return nil, fmt.Errorf("read checkpoint: %w", err)
		}
		return nil, fmt.Errorf("read checkpoint: %w: %w", ErrCorruptCheckpoint, err)
	}
	if checksum(f.Data) != f.Checksum {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, ErrCorruptCheckpoint)
	}
	var d checkpointData
	if err := json.Unmarshal(f.Data, &d); err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w: %w", ErrCorruptCheckpoint, err)
	}
	for i := range d.Claims {
		rec := d.Claims[i]
		if rec.UID == "" || rec.Namespace == "" || rec.Name == "" {
			return nil, fmt.Errorf("decode checkpoint: %w: a claim record lacks its uid, namespace or name", ErrCorruptCheckpoint)
		}
		s.claims[rec.UID] = &rec
	}
	return s, nil
}

// save writes the checkpoint (atomically: temp file, fsync, rename).
func (s *claimStore) save() error {
	if s.path == "" {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	data, err := json.Marshal(checkpointData{Claims: s.snapshot()})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	file, err := json.Marshal(checkpointFile{Data: data, Checksum: checksum(data)})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return fmt.Errorf("create checkpoint dir: %w", err)
	}
	if err := atomicfile.WriteFile(s.path, file, 0o600); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
