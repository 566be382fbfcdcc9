package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// extractTar unpacks a root filesystem tar (plain or gzip) into dest.
//
// Safety: every operation goes through an os.Root on dest, so neither a
// name with ".." nor a symlink planted by an earlier entry can make a
// later entry write outside dest. Symlinks are created as they are (their
// targets are only resolved inside the container); hard links must point
// at an entry inside the archive. Device nodes and FIFOs are skipped (the
// runtime provides /dev), as are overlay whiteouts. Ownership is kept when
// running as root.
func extractTar(ctx context.Context, r io.Reader, dest string) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("open destination: %w", err)
	}
	defer root.Close()
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("open gzip stream: %w", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	tr := tar.NewReader(r)
	x := extractor{root: root, chown: os.Geteuid() == 0}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
}

type extractor struct {
	root  *os.Root
	chown bool
}

// cleanName makes an archive path relative to the root; "" is the root.
func cleanName(name string) (string, error) {
	p := path.Clean("/" + name)[1:]
	if strings.Contains(name, "\x00") {
		return "", errors.New("name contains NUL")
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", errors.New("path escapes the root filesystem")
		}
	}
	return p, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" || strings.HasPrefix(path.Base(name), ".wh.") {
		return nil
	}
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create parent: %w", err)
		}
	}
	mode := hdr.FileInfo().Mode()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create dir: %w", err)
		}
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives use TypeRegA
		if err := x.file(name, r); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := x.replace(name); err != nil {
			return err
		}
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			return fmt.Errorf("create symlink: %w", err)
		}
		return x.owner(name, hdr)
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil || target == "" {
			return fmt.Errorf("hard link to %q: invalid target", hdr.Linkname)
		}
		if err := x.replace(name); err != nil {
			return err
		}
		if err := x.root.Link(target, name); err != nil {
			return fmt.Errorf("create hard link: %w", err)
		}
		return nil // shares the target's inode: owner and mode are its own
	default:
		return nil // devices, FIFOs and unknown types: not needed in a rootfs
	}
	if err := x.owner(name, hdr); err != nil {
		return err
	}
	if err := x.root.Chmod(name, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if hdr.Typeflag != tar.TypeDir {
		if err := x.root.Chtimes(name, hdr.AccessTime, hdr.ModTime); err != nil {
			return fmt.Errorf("set times: %w", err)
		}
	}
	return nil
}

// file writes a regular file, replacing whatever was at name.
func (x *extractor) file(name string, r io.Reader) error {
	if err := x.replace(name); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create file: %w", err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close file: %w", err)
	}
	return nil
}

// replace removes a non-directory at name so a later entry can take its
// place (archives may list a path twice; the last one wins).
func (x *extractor) replace(name string) error {
	fi, err := x.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect existing: %w", err)
	}
	if fi.IsDir() {
		return errors.New("a directory is in the way")
	}
	if err := x.root.Remove(name); err != nil {
		return fmt.Errorf("remove existing: %w", err)
	}
	return nil
}

func (x *extractor) owner(name string, hdr *tar.Header) error {
	if !x.chown {
		return nil
	}
	if err := x.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	return nil
}
