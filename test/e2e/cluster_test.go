package e2e

import (
	"allot.dev/allot/test/internal/testproc"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	startTimeout   = 2 * time.Minute  // allot up until it prints its kubeconfig
	stopGrace      = 20 * time.Second // SIGTERM until SIGKILL
	commandTimeout = 90 * time.Second // one kubectl or allot CLI command
	watchTimeout   = 60 * time.Second // a change until a watcher prints it
)

// cluster is one `allot up` process and the directories it lives in. The
// data dir outlives restarts; the home dir keeps kubectl's cache and allot's
// "last kubeconfig" out of the real user's home.
type cluster struct {
	dataDir    string
	home       string
	args       []string // extra `allot up` flags, kept for restarts
	p          *proc
	url        string // printed by allot up
	kubeconfig string // printed by allot up
}

// newCluster prepares a cluster in temporary directories. Cleanup stops
// whatever it has started and, if the test failed, logs allot's stderr.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{dataDir: t.TempDir(), home: t.TempDir()}
	t.Cleanup(func() {
		if c.p == nil {
			return
		}
		if t.Failed() {
			t.Logf("allot up (pid %d) stderr:\n%s", c.p.PID(), tail(c.p.Stderr.String(), 16000))
		}
		if _, err := c.p.Terminate(stopGrace); err != nil {
			t.Logf("stop allot up: %v", err)
		}
	})
	return c
}

// start runs `allot up` on a free loopback port and waits until it has
// written its kubeconfig.
func (c *cluster) start(t *testing.T, extraArgs ...string) {
	t.Helper()
	if c.p != nil && !c.p.Exited() {
		t.Fatalf("start allot up: already running (pid %d)", c.p.PID())
	}
	c.args = extraArgs
	args := []string{"up", "--data-dir", c.dataDir, "--listen", "127.0.0.1:0"}
	if !hasArg(extraArgs, "--disable") {
		// The control-plane suites run without scheduler and local node;
		// tests that want them pass their own --disable.
		args = append(args, "--disable", "scheduler,node")
	}
	args = append(args, extraArgs...)
	p, err := startProc("allot up", childEnv(c.home), allotBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	c.p = p
	const listening, kc = "allot API server listening on ", "kubeconfig: "
	line, _, err := p.Stdout.WaitFor(0, startTimeout, func(s string) bool { return strings.HasPrefix(s, kc) })
	if err != nil {
		t.Fatalf("allot %s: no %q line: %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), kc, err, p.Stdout, tail(p.Stderr.String(), 16000))
	}
	c.kubeconfig = strings.TrimPrefix(line, kc)
	if want := filepath.Join(c.dataDir, "kubeconfig"); c.kubeconfig != want {
		t.Errorf("allot up printed kubeconfig %q, want %q (DATA-DIR/kubeconfig)", c.kubeconfig, want)
	}
	line, _, err = p.Stdout.WaitFor(0, time.Second, func(s string) bool { return strings.HasPrefix(s, listening) })
	if err != nil {
		t.Fatalf("allot up: no %q line before the kubeconfig line:\n%s", listening, p.Stdout)
	}
	c.url = strings.TrimPrefix(line, listening)
	if !strings.HasPrefix(c.url, "https://127.0.0.1:") {
		t.Errorf("allot up listens on %q, want https://127.0.0.1:PORT (TLS always, on the --listen address)", c.url)
	}
	t.Logf("allot up (pid %d) listening on %s", p.PID(), c.url)
}

// stop stops allot up with SIGTERM and requires a clean exit within the
// grace period.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	if c.p == nil {
		return
	}
	graceful, err := c.p.Terminate(stopGrace)
	if !graceful || err != nil {
		t.Errorf("allot up (pid %d) after SIGTERM: exited by itself=%v, exit: %v (want a clean exit within %v)\nstderr:\n%s",
			c.p.PID(), graceful, err, stopGrace, tail(c.p.Stderr.String(), 8000))
	}
}

// restart stops allot up and starts it again on the same data dir with the
// same flags.
func (c *cluster) restart(t *testing.T) {
	t.Helper()
	c.stop(t)
	c.start(t, c.args...)
}

// kubectl runs kubectl against the cluster and returns its stdout; it fails
// the test when kubectl fails.
func (c *cluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.runKubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstderr: %s\nstdout: %s", strings.Join(args, " "), err, stderr, stdout)
	}
	return stdout
}

// kubectlExpectFail runs kubectl, requires it to fail, and returns its
// stderr.
func (c *cluster) kubectlExpectFail(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.runKubectl(args...)
	var exit *exec.ExitError
	if errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &exit) {
		t.Fatalf("kubectl %s: want it to fail, got err=%v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stderr
}

func (c *cluster) runKubectl(args ...string) (stdout, stderr string, err error) {
	full := append([]string{"--kubeconfig", c.kubeconfig, "--request-timeout=60s"}, args...)
	return c.run(kubectlBin, full...)
}

// kubectlWatch starts kubectl in the background (for get -w); the caller
// waits for lines of its stdout and stops it with kill. Cleanup kills it
// too.
func (c *cluster) kubectlWatch(t *testing.T, args ...string) *proc {
	t.Helper()
	full := append([]string{"--kubeconfig", c.kubeconfig}, args...)
	p, err := startProc("kubectl", childEnv(c.home), kubectlBin, full...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// allot runs the allot CLI and returns its stdout; it fails the test when
// the command fails.
func (c *cluster) allot(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.run(allotBin, args...)
	if err != nil {
		t.Fatalf("allot %s: %v\nstderr: %s\nstdout: %s", strings.Join(args, " "), err, stderr, stdout)
	}
	return stdout
}

// allotExpectFail runs the allot CLI, requires it to fail, and returns its
// stderr.
func (c *cluster) allotExpectFail(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.run(allotBin, args...)
	var exit *exec.ExitError
	if errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &exit) {
		t.Fatalf("allot %s: want it to fail, got err=%v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stderr
}

// run runs a short command with the cluster's environment and a deadline.
func (c *cluster) run(bin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv(c.home)
	cmd.SysProcAttr = testproc.SysProcAttr()
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return out.String(), errOut.String(), err
}

func hasArg(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
