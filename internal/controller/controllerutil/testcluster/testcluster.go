// Package testcluster runs a real allot API server for controller tests:
// Build compiles cmd/allot once (from TestMain), Start runs `allot up` as a
// child process on a free loopback port with its state in a temp dir and
// returns a rest.Config for it; the process (and only it, by PID) is
// stopped in t.Cleanup. It is imported by tests only.
package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Build compiles cmd/allot into dir and returns the binary's path.
func Build(dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "allot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/allot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build allot: %w\n%s", err, out)
	}
	return bin, nil
}

// repoRoot finds the directory of go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start runs `allot up` and returns a config for its admin user.
func Start(t testing.TB, bin string) *rest.Config {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, "up", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--etcd-compaction-interval", "0", "--disable", "scheduler,node")
	// Its own process group, so a terminal's signals reach only the test;
	// XDG_CONFIG_HOME so it records its kubeconfig in the temp dir, not in
	// the user's config.
	cmd.SysProcAttr = procAttr()
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "HOME="+dir)
	logFile, err := os.Create(filepath.Join(dir, "allot.log"))
	if err != nil {
		t.Fatalf("create log file: %v", err)
	}
	cmd.Stderr = logFile
	// An os.Pipe rather than cmd.StdoutPipe: Wait must not close the
	// reading end while the output is still being drained.
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("pipe stdout: %v", err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		t.Fatalf("start allot up: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { stop(t, cmd, exited, logFile) })

	kubeconfig, err := readKubeconfigPath(stdout, 60*time.Second)
	if err != nil {
		t.Fatalf("allot up: %v (log in %s)", err, logFile.Name())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", kubeconfig, err)
	}
	return cfg
}

// readKubeconfigPath reads stdout up to the "kubeconfig: PATH" line and
// drains the rest in the background.
func readKubeconfigPath(stdout io.ReadCloser, timeout time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "kubeconfig: "); ok {
				found <- strings.TrimSpace(p)
				break
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, stdout)
		stdout.Close()
	}()
	select {
	case p, ok := <-found:
		if !ok {
			return "", errors.New("exited before printing its kubeconfig")
		}
		return p, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no kubeconfig line within %s", timeout)
	}
}

// stop ends the child by its PID: SIGTERM, then SIGKILL after a grace.
func stop(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}, logFile *os.File) {
	defer logFile.Close()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Logf("allot up (pid %d) did not stop on SIGTERM; killing it", cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-exited
	}
}
