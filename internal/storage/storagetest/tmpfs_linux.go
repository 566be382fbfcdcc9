package storagetest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of sizeMiB in a new directory under t.TempDir()
// and unmounts it in t.Cleanup. It skips the test when not run as root or
// when the mount is refused (a container without CAP_SYS_ADMIN).
func Tmpfs(t testing.TB, sizeMiB int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0700", sizeMiB)); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	// Registered after TempDir's removal, so it runs before it.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// ResizeTmpfs changes the size of a tmpfs mounted by Tmpfs, as an operator
// growing a full disk would.
func ResizeTmpfs(t testing.TB, dir string, sizeMiB int) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%dm,mode=0700", sizeMiB)); err != nil {
		t.Fatalf("resize the tmpfs at %s: %v", dir, err)
	}
}

// FillDisk allocates a file in dir that leaves about leave bytes of its
// file system free, and returns a function that removes it.
func FillDisk(t testing.TB, dir string, leave int64) (free func()) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * int64(st.Bsize)
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := avail - leave; n > 0 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("fill %s with %d bytes: %v", dir, n, err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("free the disk: %v", err)
		}
	}
}
