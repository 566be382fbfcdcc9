package translator

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// TestAllotExampleGPUTranslator runs `allot example gpu-translator` as its
// own process with a kubeconfig that carries the driver token: it
// translates, and exits 0 on SIGTERM.
func TestAllotExampleGPUTranslator(t *testing.T) {
	ns := newNamespace(t)
	kc, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range kc.AuthInfos {
		auth.Token = driverToken
	}
	kubeconfig := filepath.Join(t.TempDir(), "driver.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(allotBinary, "example", "gpu-translator", "--kubeconfig", kubeconfig, "--namespace", ns, "--workers", "1")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // only this child, by PID; a no-op once it exited
		if t.Failed() {
			t.Logf("gpu-translator stderr:\n%s", stderr.String())
		}
	})

	create(t, ns, gpuParams("cli").memory("32Gi").count(2))
	p := waitTranslation(t, ns, "cli", "the translation", func(*resourceapi.ResourceClaimParameters) bool { return true })
	if s := selectors(p); len(s) != 2 || s[0] != `quantities["memory"] >= "32Gi"` {
		t.Fatalf("selectors = %q", s)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	// The translation stays when the translator stops.
	if _, err := admin.ResourceClaimParameters(ns).Get(testContext(t), "cli"); err != nil {
		t.Fatalf("translation after stop: %v", err)
	}
}
