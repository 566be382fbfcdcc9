// Package testproc runs the allot binary and its helpers as child
// processes for the whole-system test suites (test/e2e, test/chaos): each
// child in its own process group, its output kept for tests to wait on,
// stopped by PID or process group, never by name.
package testproc

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

// Proc is a child process in its own process group. Its stdout is kept as
// lines that tests wait for; its stderr is kept for failure messages.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	Stdout *LineLog
	Stderr *LockedBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before done is closed
}

// SysProcAttr is the attribute set Start gives its children, for commands
// a test runs itself: a process group of its own, and (on Linux) killed
// when the test binary dies.
func SysProcAttr() *syscall.SysProcAttr { return procAttr() }

// Start starts bin with args and env in a new process group.
func Start(name string, env []string, bin string, args ...string) (*Proc, error) {
	p := &Proc{Stderr: &LockedBuffer{}}
	if err := p.start(name, env, p.Stderr, bin, args...); err != nil {
		return nil, err
	}
	return p, nil
}

// StartLogged is Start with stderr appended to the file at logPath
// instead of kept in memory (Stderr stays empty): for long runs.
func StartLogged(name string, env []string, logPath string, bin string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close() // the child has its own copy
	p := &Proc{Stderr: &LockedBuffer{}}
	if err := p.start(name, env, f, bin, args...); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proc) start(name string, env []string, stderr io.Writer, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	p.Name, p.Cmd, p.Stdout, p.done = name, cmd, newLineLog(), make(chan struct{})
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.Stdout.readFrom(out)
		p.err = cmd.Wait()
		close(p.done)
	}()
	return nil
}

// PID is the process id (and process group id).
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited; Err is then Wait's result.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is Wait's result once Done is closed.
func (p *Proc) Err() error { return p.err }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Terminate sends SIGTERM to the process group and, if the process has not
// exited after grace, SIGKILL. It reports whether the process exited by
// itself after SIGTERM, and Wait's result.
func (p *Proc) Terminate(grace time.Duration) (graceful bool, err error) {
	if p.Exited() {
		return false, p.err
	}
	p.SignalGroup(syscall.SIGTERM)
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(grace):
	}
	p.SignalGroup(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		return false, fmt.Errorf("%s (pid %d) still running 30s after SIGKILL", p.Name, p.PID())
	}
	return false, p.err
}

// Kill sends SIGKILL to this process only (not its group) and waits for it.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Kill() // the process may exit concurrently; done tells
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
}

// SignalGroup signals the process group led by p (Setpgid makes the group
// id equal to the pid).
func (p *Proc) SignalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.Cmd.Process.Signal(sig) // fall back to the process alone
	}
}

// LineLog collects lines of a stream and lets readers wait for one.
type LineLog struct {
	mu      sync.Mutex
	lines   []string
	eof     bool
	changed chan struct{} // closed and replaced whenever lines or eof change
}

func newLineLog() *LineLog { return &LineLog{changed: make(chan struct{})} }

func (l *LineLog) readFrom(r io.Reader) {
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

// WaitFor returns the first line at index from or later that match accepts,
// and its index. It fails when the stream ends or timeout passes first.
func (l *LineLog) WaitFor(from int, timeout time.Duration, match func(string) bool) (string, int, error) {
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

func (l *LineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// LockedBuffer is a bytes.Buffer safe for a writing process and a reading
// test.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns the last n bytes of s, marking the cut.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

// ChildEnv is the environment for allot and kubectl: the test's own,
// without anything that would point a client at another cluster or write
// into the real user's home, and without proxies for loopback.
func ChildEnv(home string) []string {
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
