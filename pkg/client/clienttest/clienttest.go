// Package clienttest runs a real allot cluster (`allot up`) as a child
// process, for tests of API clients: pkg/client's own tests and the CLI's.
// It is a test helper package, in the spirit of net/http/httptest; no
// production code imports it.
//
// Typical use from a TestMain:
//
//	bin, err := clienttest.Build(ctx, dir)
//	cl, err := clienttest.Start(ctx, bin, dir)
//	defer cl.Stop()
//	// cl.Kubeconfig, cl.Env() ...
//
// The child gets its own process group and, on Linux, dies with the test
// process. Stop ends only that child, by its PID.
package clienttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StartTimeout bounds how long Start waits for the cluster to print its
// kubeconfig.
const StartTimeout = 60 * time.Second

// Build compiles allot.dev/allot/cmd/allot into dir and returns the path
// of the binary. It runs `go build` from the current directory, which must
// be inside the allot module (true for any test of the module).
func Build(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find go tool: %w", err)
	}
	bin := filepath.Join(dir, "allot")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "allot.dev/allot/cmd/allot")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build allot: %w\n%s", err, out)
	}
	return bin, nil
}

// Cluster is a running `allot up` child process.
type Cluster struct {
	// Kubeconfig is the admin kubeconfig the cluster wrote.
	Kubeconfig string
	// URL is the API server's address.
	URL string
	// DataDir holds the cluster's state; LogFile its stderr.
	DataDir string
	LogFile string
	// ConfigHome is the XDG_CONFIG_HOME given to the child, so that it
	// records its kubeconfig there and not in the user's config dir.
	ConfigHome string

	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs `BINARY up --listen 127.0.0.1:0 --data-dir DIR/data` plus
// extra args, and returns once it has printed its kubeconfig path.
func Start(ctx context.Context, binary, dir string, extra ...string) (*Cluster, error) {
	cl := &Cluster{
		DataDir: filepath.Join(dir, "data"), LogFile: filepath.Join(dir, "allot.log"),
		ConfigHome: filepath.Join(dir, "config"), exited: make(chan struct{}),
	}
	logf, err := os.Create(cl.LogFile)
	if err != nil {
		return nil, fmt.Errorf("create cluster log: %w", err)
	}
	args := []string{"up", "--listen", "127.0.0.1:0", "--data-dir", cl.DataDir}
	if !hasFlag(extra, "--disable") {
		// A bare control plane: tests run their own schedulers and agents.
		args = append(args, "--disable", "scheduler,node")
	}
	args = append(args, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cl.ConfigHome)
	cmd.Stderr = logf
	setProcAttr(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("pipe cluster stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start allot up: %w", err)
	}
	cl.cmd = cmd
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(cl.exited)
	}()
	if err := cl.awaitKubeconfig(ctx, stdout); err != nil {
		cl.Stop()
		return nil, fmt.Errorf("%w\n--- allot up log:\n%s", err, cl.Log())
	}
	return cl, nil
}

func (cl *Cluster) awaitKubeconfig(ctx context.Context, stdout io.Reader) error {
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "allot API server listening on "); ok {
				cl.URL = strings.TrimSpace(u)
			}
			if p, ok := strings.CutPrefix(line, "kubeconfig: "); ok && cl.Kubeconfig == "" {
				cl.Kubeconfig = strings.TrimSpace(p)
				close(found)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case <-found:
		return nil
	case <-cl.exited:
		return errors.New("allot up exited before printing its kubeconfig")
	case <-timer.C:
		return fmt.Errorf("allot up printed no kubeconfig within %s", StartTimeout)
	case <-ctx.Done():
		return fmt.Errorf("wait for allot up: %w", ctx.Err())
	}
}

// Env is the environment for a child process (a CLI under test, kubectl)
// that should talk to this cluster by default.
func (cl *Cluster) Env() []string {
	return append(os.Environ(), "KUBECONFIG="+cl.Kubeconfig, "XDG_CONFIG_HOME="+cl.ConfigHome)
}

// Log returns what the cluster wrote to stderr so far.
func (cl *Cluster) Log() string {
	data, err := os.ReadFile(cl.LogFile)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return string(data)
}

// Stop ends the cluster: SIGTERM to its PID, SIGKILL after 10 seconds.
func (cl *Cluster) Stop() {
	if cl.cmd == nil || cl.cmd.Process == nil {
		return
	}
	_ = cl.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-cl.exited:
	case <-time.After(10 * time.Second):
		_ = cl.cmd.Process.Kill()
		<-cl.exited
	}
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
