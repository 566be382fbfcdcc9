// Package atomicfile replaces files so that readers see the old content or
// the new, never a mix: write a temporary file in the same directory, then
// rename it over the target. Tokens, certificates, checkpoints and the
// runtimes' records are written this way, because a process may be killed
// at any instant.
package atomicfile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data and syncs the file and its directory,
// so the content survives a crash of the machine as well.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, true)
}

// WriteFileNoSync is WriteFile without fsync: atomic against a process
// crash, not a machine crash. For cheap, high-volume state.
func WriteFileNoSync(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

// WriteJSON replaces path with v encoded as indented JSON, synced.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return WriteFile(path, append(data, '\n'), 0o644)
}

// ReadJSON decodes the JSON file at path into v. A missing file is
// reported with an error matching os.ErrNotExist.
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// ErrCorrupt is matched by the errors of ReadChecksummed for a file that
// was read but cannot be trusted: not an envelope, a checksum that does
// not match, or data that does not decode.
var ErrCorrupt = errors.New("corrupt")

// checksummed is the file WriteChecksummed writes: the JSON of a value and
// its SHA-256, so that a reader can tell a damaged file from a valid one.
type checksummed struct {
	Data     json.RawMessage `json:"data"`
	Checksum string          `json:"checksum"`
}

func checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// WriteChecksummed replaces path, synced and readable by its owner only,
// with v as JSON and its checksum, creating path's directory if needed.
// Checkpoints that a restarted process must be able to trust use it.
func WriteChecksummed(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	file, err := json.Marshal(checksummed{Data: data, Checksum: checksum(data)})
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("create dir: %w", err)
	}
	return WriteFile(path, file, 0o600)
}

// ReadChecksummed decodes into v what WriteChecksummed wrote at path. A
// file that cannot be read gives its *fs.PathError (matching
// fs.ErrNotExist when it is missing); one that cannot be trusted, an error
// matching ErrCorrupt.
func ReadChecksummed(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f checksummed
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("decode %s: %w: %w", path, ErrCorrupt, err)
	}
	if checksum(f.Data) != f.Checksum {
		return fmt.Errorf("%s: %w: checksum mismatch", path, ErrCorrupt)
	}
	if err := json.Unmarshal(f.Data, v); err != nil {
		return fmt.Errorf("decode data of %s: %w: %w", path, ErrCorrupt, err)
	}
	return nil
}

func write(path string, data []byte, perm os.FileMode, sync bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove temp file: %w", rerr))
			}
		}
	}()
	if err := writeAndClose(f, data, perm, sync); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
	}
	if !sync {
		return nil
	}
	return syncDir(dir)
}

func writeAndClose(f *os.File, data []byte, perm os.FileMode, sync bool) error {
	err := f.Chmod(perm)
	if err != nil {
		err = fmt.Errorf("chmod temp file: %w", err)
	} else if _, err = f.Write(data); err != nil {
		err = fmt.Errorf("write temp file: %w", err)
	} else if sync {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("sync temp file: %w", err)
		}
	}
	if cerr := f.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close temp file: %w", cerr))
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync dir: %w", err), d.Close())
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close dir: %w", err)
	}
	return nil
}
