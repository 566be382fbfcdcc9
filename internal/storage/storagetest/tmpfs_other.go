//go:build !linux

package storagetest

import "testing"

// Tmpfs skips: tmpfs mounts are Linux only.
func Tmpfs(t testing.TB, sizeMiB int) string {
	t.Skip("tmpfs mounts are Linux only")
	return ""
}

// ResizeTmpfs is never reached where Tmpfs skips.
func ResizeTmpfs(t testing.TB, dir string, sizeMiB int) { t.Skip("tmpfs mounts are Linux only") }

// FillDisk is never reached where Tmpfs skips.
func FillDisk(t testing.TB, dir string, leave int64) func() {
	t.Skip("tmpfs mounts are Linux only")
	return nil
}
