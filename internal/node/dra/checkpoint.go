package dra

import (
	"errors"
	"fmt"
	"io/fs"

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

// loadClaimStore returns a store with the checkpoint at path (none yet:
// empty; path empty: memory only).
func loadClaimStore(path string) (*claimStore, error) {
	s := &claimStore{path: path, claims: map[types.UID]*claimRecord{}}
	if path == "" {
		return s, nil
	}
	var d checkpointData
	if err := atomicfile.ReadChecksummed(path, &d); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return s, nil
		case errors.Is(err, atomicfile.ErrCorrupt):
			return nil, fmt.Errorf("read checkpoint: %w: %w", ErrCorruptCheckpoint, err)
		}
		return nil, fmt.Errorf("read checkpoint: %w", err)
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
	if err := atomicfile.WriteChecksummed(s.path, checkpointData{Claims: s.snapshot()}); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
