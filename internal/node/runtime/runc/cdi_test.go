package runc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCDISpec writes a CDI spec for kind example.com/gpu with device gpu0:
// env GPU=0, a mount of a host file, the device node /dev/zero as
// /dev/gpu0, and a createRuntime hook that leaves a marker on the host.
func writeCDISpec(t *testing.T, dir, infoFile, marker string) {
	t.Helper()
	spec := fmt.Sprintf(`{
  "cdiVersion": "0.6.0",
  "kind": "example.com/gpu",
  "devices": [{
    "name": "gpu0",
    "containerEdits": {
      "env": ["GPU=0"],
      "mounts": [{"hostPath": %q, "containerPath": "/etc/gpu-info", "options": ["ro", "bind"]}],
      "deviceNodes": [{"path": "/dev/gpu0", "hostPath": "/dev/zero", "permissions": "rw"}]
    }
  }],
  "containerEdits": {
    "env": ["GPU_VENDOR=example"],
    "hooks": [{"hookName": "createRuntime", "path": "/bin/sh", "args": ["sh", "-c", "touch %s"]}]
  }
}`, infoFile, marker)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.com-gpu.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCDIDevices(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cdiDir := filepath.Join(t.TempDir(), "cdi")
	r := newTestRuntime(t, root, func(o *Options) { o.CDISpecDirs = []string{cdiDir, filepath.Join(root, "absent")} })

	// The spec appears after the runtime was made: Create must rescan.
	info := filepath.Join(t.TempDir(), "gpu-info")
	if err := os.WriteFile(info, []byte("model: example-9000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "hook-ran")
	writeCDISpec(t, cdiDir, info, marker)

	cs := spec(t, "cdi", "sh", "-c", `echo "GPU=$GPU vendor=$GPU_VENDOR"; cat /etc/gpu-info; head -c 5 /dev/gpu0 | wc -c`)
	cs.CDIDevices = []string{"example.com/gpu=gpu0"}
	id := run(t, r, cs)
	if st := waitExited(t, r, id); st.ExitCode != 0 {
		t.Fatalf("status = %+v\nlog:\n%s", st, readLog(t, cs))
	}
	wantLog(t, cs, "GPU=0 vendor=example", "model: example-9000", "5")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("CDI createRuntime hook did not run: %v", err)
	}

	bad := spec(t, "cdi-bad", "true")
	bad.CDIDevices = []string{"example.com/gpu=gpu0", "example.com/gpu=gpu7", "other.io/x=y"}
	_, err := r.Create(ctxT(t), bad)
	t.Logf("unresolvable: %v", err)
	if err == nil || !strings.Contains(err.Error(), "example.com/gpu=gpu7") || !strings.Contains(err.Error(), "other.io/x=y") ||
		strings.Contains(err.Error(), "gpu0,") {
		t.Fatalf("Create with unresolvable CDI devices: %v", err)
	}
	malformed := spec(t, "cdi-malformed", "true")
	malformed.CDIDevices = []string{"gpu0"}
	if _, err := r.Create(ctxT(t), malformed); err == nil || !strings.Contains(err.Error(), `"gpu0"`) {
		t.Fatalf("Create with a malformed CDI name: %v", err)
	}
	list, err := r.List(ctxT(t))
	if err != nil || len(list) != 1 {
		t.Fatalf("failed creates left containers: %+v, %v", list, err)
	}
}
