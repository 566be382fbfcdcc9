package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// builtins are the images made on first use instead of imported.
var builtins = map[string]func(ctx context.Context, s *Store, rootfs string) (Config, error){
	"busybox": buildBusybox,
}

// listTimeout bounds `busybox --list`.
const listTimeout = 10 * time.Second

// busyboxFiles are the small files of the busybox image.
var busyboxFiles = map[string]string{
	"etc/passwd":      "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
	"etc/group":       "root:x:0:\nnogroup:x:65534:\n",
	"etc/hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
	"etc/resolv.conf": "",
	"etc/hostname":    "",
}

// buildBusybox makes a busybox rootfs: the static binary as /bin/busybox,
// a symlink in /bin for each applet (so /bin/sh exists), root in
// /etc/passwd, and the mountpoints a runtime needs.
func buildBusybox(ctx context.Context, s *Store, rootfs string) (Config, error) {
	applets, err := busyboxApplets(ctx, s.busyboxPath)
	if err != nil {
		return Config{}, err
	}
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "root", "tmp", "var", "run"} {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			return Config{}, fmt.Errorf("create /%s: %w", d, err)
		}
	}
	for d, mode := range map[string]os.FileMode{"tmp": 0o777 | os.ModeSticky, "root": 0o700} {
		if err := os.Chmod(filepath.Join(rootfs, d), mode); err != nil {
			return Config{}, fmt.Errorf("chmod /%s: %w", d, err)
		}
	}
	if err := copyFile(s.busyboxPath, filepath.Join(rootfs, "bin", "busybox"), 0o755); err != nil {
		return Config{}, fmt.Errorf("copy busybox: %w", err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", a)); err != nil {
			return Config{}, fmt.Errorf("link applet %s: %w", a, err)
		}
	}
	for name, content := range busyboxFiles {
		if err := os.WriteFile(filepath.Join(rootfs, name), []byte(content), 0o644); err != nil {
			return Config{}, fmt.Errorf("write /%s: %w", name, err)
		}
	}
	return Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + DefaultPath}}, nil
}

// busyboxApplets runs `busybox --list`; the list always contains sh.
func busyboxApplets(ctx context.Context, bin string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets (is busybox-static installed? apt-get install busybox-static): %w", err)
	}
	var applets []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		a := strings.TrimSpace(sc.Text())
		if a == "" || a == "busybox" || strings.ContainsAny(a, "/\x00") || a == "." || a == ".." {
			continue
		}
		applets = append(applets, a)
	}
	if !slices.Contains(applets, "sh") {
		return nil, fmt.Errorf("busybox %s has no sh applet", bin)
	}
	return applets, nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
