package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data: it writes a temporary file in the
// same directory, syncs it, renames it over path and syncs the directory, so
// readers see the old content or the new, never a mix, even after a crash.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
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
	if err := writeAndClose(f, data, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
	}
	return syncDir(dir)
}

func writeAndClose(f *os.File, data []byte, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err != nil {
		err = fmt.Errorf("chmod temp file: %w", err)
	} else if _, err = f.Write(data); err != nil {
		err = fmt.Errorf("write temp file: %w", err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("sync temp file: %w", err)
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
