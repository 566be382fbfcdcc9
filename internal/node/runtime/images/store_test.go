package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	tests := map[string]struct {
		in, want string
		wantErr  bool
	}{
		"plain":              {in: "busybox", want: "busybox"},
		"latest":             {in: "busybox:latest", want: "busybox"},
		"docker hub library": {in: "docker.io/library/busybox:latest", want: "busybox"},
		"docker hub org":     {in: "docker.io/myorg/app:v1", want: "myorg/app:v1"},
		"index host":         {in: "index.docker.io/library/alpine", want: "alpine"},
		"other registry":     {in: "ghcr.io/org/app:1.2", want: "ghcr.io/org/app:1.2"},
		"registry port":      {in: "localhost:5000/app:v1", want: "localhost:5000/app:v1"},
		"tag kept":           {in: "busybox:1.36", want: "busybox:1.36"},
		"digest":             {in: "busybox@sha256:abc", wantErr: true},
		"traversal":          {in: "../etc", wantErr: true},
		"dotdot inside":      {in: "a/../b", wantErr: true},
		"empty":              {in: "", wantErr: true},
		"upper repo":         {in: "BusyBox", wantErr: true},
		"plus":               {in: "a+b", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Normalize(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Normalize(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// tarEntry describes one archive member for makeTar.
type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func makeTar(t *testing.T, entries []tarEntry, gz bool) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, ModTime: time.Unix(1e9, 0)}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if gz {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		data = zb.Bytes()
	}
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	s := New(t.TempDir())
	tarPath := makeTar(t, []tarEntry{
		{name: "./bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "./bin/tool", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755},
		{name: "./bin/alias", typ: tar.TypeSymlink, link: "tool"},
		{name: "./bin/abs", typ: tar.TypeSymlink, link: "/bin/tool"},
		{name: "./bin/hard", typ: tar.TypeLink, link: "./bin/tool"},
		{name: "/etc/motd", typ: tar.TypeReg, body: "hi"},
		{name: "dev/null", typ: tar.TypeChar},
		{name: "etc/.wh.gone", typ: tar.TypeReg},
	}, true)
	cfg := Config{Cmd: []string{"/bin/tool"}, Env: []string{"A=1"}, WorkingDir: "/etc"}
	img, err := s.Import(ctx, "docker.io/library/tool:latest", tarPath, cfg, false)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if img.Name != "tool" || img.Config.WorkingDir != "/etc" || img.Config.Cmd[0] != "/bin/tool" {
		t.Fatalf("image = %+v", img)
	}
	fi, err := os.Stat(filepath.Join(img.Rootfs, "bin/tool"))
	if err != nil || fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/tool: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(img.Rootfs, "bin/abs")); err != nil || l != "/bin/tool" {
		t.Fatalf("absolute symlink not kept: %q %v", l, err)
	}
	hard, _ := os.Stat(filepath.Join(img.Rootfs, "bin/hard"))
	if !os.SameFile(fi, hard) {
		t.Fatal("bin/hard is not a hard link of bin/tool")
	}
	for _, p := range []string{"dev/null", "etc/.wh.gone"} {
		if _, err := os.Lstat(filepath.Join(img.Rootfs, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s should be skipped: %v", p, err)
		}
	}
	if _, err := s.Import(ctx, "tool", tarPath, cfg, false); !errors.Is(err, ErrExists) {
		t.Fatalf("second Import error = %v, want ErrExists", err)
	}
	if _, err := s.Import(ctx, "tool", tarPath, Config{}, true); err != nil {
		t.Fatalf("replacing Import: %v", err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "tool" || len(list[0].Config.Cmd) != 0 {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestImportRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	tests := map[string][]tarEntry{
		"dotdot": {{name: "../evil", typ: tar.TypeReg, body: "x"}},
		"through symlink": {
			{name: "escape", typ: tar.TypeSymlink, link: outside},
			{name: "escape/evil", typ: tar.TypeReg, body: "x"},
		},
		"through relative symlink": {
			{name: "up", typ: tar.TypeSymlink, link: "../../../../../../../.." + outside},
			{name: "up/evil", typ: tar.TypeReg, body: "x"},
		},
		"hard link outside": {{name: "evil", typ: tar.TypeLink, link: "../../etc/passwd"}},
	}
	for name, entries := range tests {
		t.Run(name, func(t *testing.T) {
			s := New(t.TempDir())
			_, err := s.Import(context.Background(), "evil", makeTar(t, entries, false), Config{}, false)
			if err == nil {
				t.Fatal("Import succeeded, want an error")
			}
			if _, err := os.Lstat(filepath.Join(outside, "evil")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("file written outside the rootfs: %v", err)
			}
			if list, _ := s.List(); len(list) != 0 {
				t.Fatalf("failed import left an image: %+v", list)
			}
		})
	}
}

func TestUnknownImageNamed(t *testing.T) {
	_, err := New(t.TempDir()).Get(context.Background(), "docker.io/acme/nothing:v2")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "acme/nothing:v2") {
		t.Fatalf("Get error = %v, want ErrNotFound naming the image", err)
	}
}

func TestBuiltinBusybox(t *testing.T) {
	if _, err := exec.LookPath("/bin/busybox"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("/bin/busybox missing: install busybox-static (apt-get install -y busybox-static)")
		}
		t.Skip("/bin/busybox missing: apt-get install -y busybox-static")
	}
	s := New(t.TempDir())
	img, err := s.Get(context.Background(), "docker.io/library/busybox:latest")
	if err != nil {
		t.Fatalf("Get busybox: %v", err)
	}
	for _, p := range []string{"bin/busybox", "bin/sh", "bin/echo", "etc/passwd", "proc", "sys", "dev", "tmp"} {
		if _, err := os.Lstat(filepath.Join(img.Rootfs, p)); err != nil {
			t.Errorf("busybox rootfs lacks /%s: %v", p, err)
		}
	}
	out, err := exec.Command(filepath.Join(img.Rootfs, "bin/sh"), "-c", "echo ok").Output()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("bin/sh -c 'echo ok' = %q, %v", out, err)
	}
	again, err := s.Get(context.Background(), "busybox")
	if err != nil || again.Created != img.Created {
		t.Fatalf("second Get rebuilt or failed: %+v %v", again, err)
	}
}
