package runc

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// overlayEscaper escapes the characters overlayfs treats specially in
// its mount options (image directories may contain ':' from tags).
var overlayEscaper = strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)

// mountOverlay mounts a copy-on-write view of the image rootfs lower at
// the bundle's rootfs/, with the container's writes going to upper/. The
// mount lives in the agent's (host) mount namespace, so it outlives the
// agent process; Remove unmounts it.
func mountOverlay(b bundle, lower string) error {
	merged, upper, work := b.path(rootfsName), b.path(upperName), b.path(workName)
	for _, d := range []string{merged, upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s",
		overlayEscaper.Replace(lower), overlayEscaper.Replace(upper), overlayEscaper.Replace(work))
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		for _, d := range []string{merged, upper, work} {
			_ = os.RemoveAll(d) // empty dirs just made; the mount error matters
		}
		return fmt.Errorf("mount overlay: %w", err)
	}
	return nil
}

// unmountRootfs detaches the bundle's overlay; a rootfs that is not
// mounted (read-only mode, or after a reboot) is fine.
func unmountRootfs(b bundle) error {
	err := unix.Unmount(b.path(rootfsName), unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount rootfs: %w", err)
}
