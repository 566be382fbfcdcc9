package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process in its own process group. Its stdout is kept as
// lines that tests wait for; its stderr is kept for failure messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout *lineLog
	stderr *lockedBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before done is closed
}

// startProc starts bin with args and env in a new process group.
func startProc(name string, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	p := &proc{name: name, cmd: cmd, stdout: newLineLog(), stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.stdout.readFrom(out)
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM to the process group and, if the process has not
// exited after grace, SIGKILL. It reports whether the process exited by
// itself after SIGTERM, and Wait's result.
func (p *proc) terminate(grace time.Duration) (graceful bool, err error) {
	if p.exited() {
		return false, p.err
	}
	p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(grace):
	}
	p.signalGroup(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		return false, fmt.Errorf("%s (pid %d) still running 30s after SIGKILL", p.name, p.pid())
	}
	return false, p.err
}

// kill sends SIGKILL to this process only (not its group) and waits for it.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill() // the process may exit concurrently; done tells
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
}

// signalGroup signals the process group led by p (Setpgid makes the group
// id equal to the pid).
func (p *proc) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Signal(sig) // fall back to the process alone
	}
}

// lineLog collects lines of a stream and lets readers wait for one.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	eof     bool
	changed chan struct{} // closed and replaced whenever lines or eof change
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) readFrom(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r) // a line too long for the scanner: keep the writer unblocked
	l.mu.Lock()
	l.eof = true
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// waitFor returns the first line at index from or later that match accepts,
// and its index. It fails when the stream ends or timeout passes first.
func (l *lineLog) waitFor(from int, timeout time.Duration, match func(string) bool) (string, int, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for i := from; i < len(l.lines); i++ {
			if match(l.lines[i]) {
				line := l.lines[i]
				l.mu.Unlock()
				return line, i, nil
			}
		}
		from = max(from, len(l.lines))
		eof, changed := l.eof, l.changed
		l.mu.Unlock()
		if eof {
			return "", 0, errors.New("output ended before the expected line")
		}
		select {
		case <-changed:
		case <-deadline.C:
			return "", 0, fmt.Errorf("expected line did not appear within %v", timeout)
		}
	}
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// lockedBuffer is a bytes.Buffer safe for a writing process and a reading
// test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n bytes of s, marking the cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

// childEnv is the environment for allot and kubectl: the test's own,
// without anything that would point a client at another cluster or write
// into the real user's home, and without proxies for loopback.
func childEnv(home string) []string {
	drop := map[string]bool{"KUBECONFIG": true, "HOME": true, "XDG_CONFIG_HOME": true,
		"XDG_CACHE_HOME": true, "NO_PROXY": true, "no_proxy": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+home+"/.config", "XDG_CACHE_HOME="+home+"/.cache",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
}
