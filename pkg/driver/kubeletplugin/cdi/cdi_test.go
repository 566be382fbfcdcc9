package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	specs "tags.cncf.io/container-device-interface/specs-go"
)

const kind = "gpu.example.com/gpu"

func edits(env ...string) specs.ContainerEdits {
	return specs.ContainerEdits{Env: env, DeviceNodes: []*specs.DeviceNode{{Path: "/dev/gpu-example-0", HostPath: "/dev/null"}}}
}

// TestWriteReadRemove writes a claim's spec, lets a real CDI cache resolve
// and inject it, rewrites it only when it changes, and removes it.
func TestWriteReadRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cdi")
	dev, written, err := WriteClaimSpec(dir, kind, "uid-1", edits("GPU_CLAIM=ns/a"))
	if err != nil {
		t.Fatal(err)
	}
	if dev != "gpu.example.com/gpu=uid-1" || !written {
		t.Errorf("WriteClaimSpec = %q, %v; want gpu.example.com/gpu=uid-1, true", dev, written)
	}
	path, err := SpecPath(dir, kind, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "gpu.example.com-gpu_uid-1.json" {
		t.Errorf("spec file %s", path)
	}

	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	ociSpec := &oci.Spec{Process: &oci.Process{}}
	if _, err := cache.InjectDevices(ociSpec, dev); err != nil {
		t.Fatalf("inject %s: %v", dev, err)
	}
	if !slices.Contains(ociSpec.Process.Env, "GPU_CLAIM=ns/a") {
		t.Errorf("injected env %v lacks GPU_CLAIM=ns/a", ociSpec.Process.Env)
	}

	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, written, err := WriteClaimSpec(dir, kind, "uid-1", edits("GPU_CLAIM=ns/a")); err != nil || written {
		t.Errorf("same content again: written %v, err %v; want false, nil", written, err)
	}
	if again, _ := os.Stat(path); !again.ModTime().Equal(info.ModTime()) || !os.SameFile(info, again) {
		t.Error("an unchanged spec was rewritten")
	}
	if _, written, err := WriteClaimSpec(dir, kind, "uid-1", edits("GPU_CLAIM=ns/b")); err != nil || !written {
		t.Errorf("new content: written %v, err %v; want true, nil", written, err)
	}
	spec, err := ReadClaimSpec(dir, kind, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Kind != kind || len(spec.Devices) != 1 || spec.Devices[0].Name != "uid-1" || spec.Devices[0].ContainerEdits.Env[0] != "GPU_CLAIM=ns/b" {
		t.Errorf("read back %+v", spec)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the spec (no temporary files)", len(entries))
	}

	for i, want := range []bool{true, false} {
		removed, err := RemoveClaimSpec(dir, kind, "uid-1")
		if err != nil || removed != want {
			t.Errorf("remove #%d = %v, %v; want %v, nil", i+1, removed, err, want)
		}
	}
	if _, err := ReadClaimSpec(dir, kind, "uid-1"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read after remove: %v, want os.ErrNotExist", err)
	}
}

func TestReadCorruptSpec(t *testing.T) {
	dir := t.TempDir()
	path, err := SpecPath(dir, kind, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadClaimSpec(dir, kind, "uid-1"); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("corrupt spec: %v, want a parse error", err)
	}
}

func TestInvalidInput(t *testing.T) {
	tests := map[string]struct {
		kind  string
		uid   string
		edits specs.ContainerEdits
		want  string
	}{
		"kind without class": {kind: "gpu.example.com", uid: "u", want: "must be VENDOR/CLASS"},
		"bad vendor":         {kind: "-gpu/gpu", uid: "u", want: `CDI kind "-gpu/gpu"`},
		"bad class":          {kind: "gpu.example.com/gpu!", uid: "u", want: `CDI kind "gpu.example.com/gpu!"`},
		"uid with slash":     {kind: kind, uid: "../x", want: `claim uid "../x"`},
		"empty uid":          {kind: kind, uid: "", want: `claim uid ""`},
		"bad env":            {kind: kind, uid: "u", edits: specs.ContainerEdits{Env: []string{"NOEQUALS"}}, want: "container edits"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, _, err := WriteClaimSpec(dir, tc.kind, types.UID(tc.uid), tc.edits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a rejected spec left %d files", len(entries))
			}
		})
	}
}

// TestRemoveClaimSpecRemovesLeftovers: a temporary file of the claim's
// spec left by a driver killed between creating and renaming it goes with
// the claim's removal; another claim's does not.
func TestRemoveClaimSpecRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	path, err := SpecPath(dir, "example.com/gpu", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := SpecPath(dir, "example.com/gpu", "uid-2")
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "."+filepath.Base(path)+".tmp-123")
	theirs := filepath.Join(dir, "."+filepath.Base(other)+".tmp-456")
	for _, f := range []string{mine, theirs} {
		if err := os.WriteFile(f, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if removed, err := RemoveClaimSpec(dir, "example.com/gpu", "uid-1"); err != nil || removed {
		t.Fatalf("RemoveClaimSpec = %v, %v; want false (no spec), nil", removed, err)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("the claim's leftover temporary file is still there: %v", err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("another claim's temporary file was removed: %v", err)
	}
}
