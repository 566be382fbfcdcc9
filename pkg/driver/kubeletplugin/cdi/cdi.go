// Package cdi writes and removes the CDI spec file of one prepared claim:
// one file per claim, holding one CDI device named after the claim's UID,
// so that "is this claim prepared" survives a driver restart as "does its
// spec file exist".
//
// Files are named as CDI's transient specs (VENDOR-CLASS_UID.json) and are
// replaced atomically (temporary file, fsync, rename, fsync of the
// directory), so the runtime reading the directory sees the old content or
// the new, and a crash leaves no half-written spec. Temporary files start
// with a dot and do not end in .json, so CDI caches ignore them.
package cdi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	specs "tags.cncf.io/container-device-interface/specs-go"
)

// DeviceName is the fully qualified CDI device name of a claim's device:
// KIND=UID, for example gpu.example.com/gpu=8f1c... It fails when kind is
// not VENDOR/CLASS or the UID is not a valid CDI device name.
func DeviceName(kind string, claimUID types.UID) (string, error) {
	vendor, class, err := splitKind(kind)
	if err != nil {
		return "", err
	}
	if err := parser.ValidateDeviceName(string(claimUID)); err != nil {
		return "", fmt.Errorf("claim uid %q: not usable as a CDI device name: %w", claimUID, err)
	}
	return parser.QualifiedName(vendor, class, string(claimUID)), nil
}

// SpecPath is the path of a claim's spec file in dir.
func SpecPath(dir, kind string, claimUID types.UID) (string, error) {
	vendor, class, err := splitKind(kind)
	if err != nil {
		return "", err
	}
	if err := parser.ValidateDeviceName(string(claimUID)); err != nil {
		return "", fmt.Errorf("claim uid %q: not usable in a CDI spec file name: %w", claimUID, err)
	}
	return filepath.Join(dir, cdiapi.GenerateTransientSpecName(vendor, class, string(claimUID))+".json"), nil
}

func splitKind(kind string) (vendor, class string, err error) {
	vendor, class = parser.ParseQualifier(kind)
	if vendor == "" || class == "" {
		return "", "", fmt.Errorf("CDI kind %q: must be VENDOR/CLASS, such as example.com/gpu", kind)
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return "", "", fmt.Errorf("CDI kind %q: %w", kind, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return "", "", fmt.Errorf("CDI kind %q: %w", kind, err)
	}
	return vendor, class, nil
}

// WriteClaimSpec writes the spec of a claim into dir (created if needed):
// kind KIND and one device, named after the claim's UID, with edits. It
// returns the device's qualified name and whether the file was written; a
// file that already has this content is left alone.
func WriteClaimSpec(dir, kind string, claimUID types.UID, edits specs.ContainerEdits) (device string, written bool, err error) {
	device, err = DeviceName(kind, claimUID)
	if err != nil {
		return "", false, err
	}
	path, err := SpecPath(dir, kind, claimUID)
	if err != nil {
		return "", false, err
	}
	if err := (&cdiapi.ContainerEdits{ContainerEdits: &edits}).Validate(); err != nil {
		return "", false, fmt.Errorf("CDI container edits of claim %s: %w", claimUID, err)
	}
	spec := &specs.Spec{Kind: kind, Devices: []specs.Device{{Name: string(claimUID), ContainerEdits: edits}}}
	if spec.Version, err = cdiapi.MinimumRequiredVersion(spec); err != nil {
		return "", false, fmt.Errorf("CDI spec of claim %s: %w", claimUID, err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", false, fmt.Errorf("encode CDI spec of claim %s: %w", claimUID, err)
	}
	data = append(data, '\n')
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return device, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("create CDI spec directory: %w", err)
	}
	if err := writeAtomic(path, data); err != nil {
		return "", false, fmt.Errorf("write CDI spec of claim %s: %w", claimUID, err)
	}
	return device, true, nil
}

// ReadClaimSpec reads and validates a claim's spec. A missing file is
// reported with an error matching os.ErrNotExist.
func ReadClaimSpec(dir, kind string, claimUID types.UID) (*specs.Spec, error) {
	path, err := SpecPath(dir, kind, claimUID)
	if err != nil {
		return nil, err
	}
	spec, err := cdiapi.ReadSpec(path, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("read CDI spec of claim %s: %w", claimUID, err)
	}
	return spec.Spec, nil
}

// RemoveClaimSpec removes a claim's spec and reports whether there was
// one; a missing file is a success. Temporary files of the spec that a
// driver killed mid-write left behind go too.
func RemoveClaimSpec(dir, kind string, claimUID types.UID) (removed bool, err error) {
	path, err := SpecPath(dir, kind, claimUID)
	if err != nil {
		return false, err
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "."+filepath.Base(path)+".tmp-*"))
	for _, l := range leftovers {
		if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("remove temporary CDI spec of claim %s: %w", claimUID, err)
		}
	}
	switch err := os.Remove(path); {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remove CDI spec of claim %s: %w", claimUID, err)
	}
	if err := syncDir(dir); err != nil {
		return true, fmt.Errorf("remove CDI spec of claim %s: %w", claimUID, err)
	}
	return true, nil
}

// writeAtomic replaces path with data: temporary file in the same
// directory, fsync, rename, fsync of the directory.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := fillAndClose(f, data); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename temporary file: %w", err)
	}
	return syncDir(dir)
}

func fillAndClose(f *os.File, data []byte) error {
	err := f.Chmod(0o644)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write temporary file: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory to sync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}
