package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"allot.dev/allot/pkg/client/clienttest"
)

// startComponent runs `allot ARGS...` in its own process group with env
// (nil: the test's), its output in DIR/NAME.log; it is killed (by process
// group) when the test ends, and its log shown if the test failed.
func startComponent(t *testing.T, dir, name string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(allotBin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return cmd
}

// componentLog is what a component started by startComponent logged.
func componentLog(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
	return string(b)
}

// componentKubeconfig adds a token of role named name to cl's tokens and
// writes a kubeconfig with it into dir, as an operator gives a component
// its credentials.
func componentKubeconfig(ctx context.Context, t *testing.T, cl *clienttest.Cluster, dir, role, name string) string {
	t.Helper()
	kc := filepath.Join(dir, name+".kubeconfig")
	if out, err := exec.CommandContext(ctx, allotBin, "token", "create", "--role", role, "--name", name,
		"--data-dir", cl.DataDir, "--kubeconfig", kc).CombinedOutput(); err != nil {
		t.Fatalf("token create: %v\n%s", err, out)
	}
	return kc
}
