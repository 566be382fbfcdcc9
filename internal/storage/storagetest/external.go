package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
)

// EnvRequireEtcd makes StartExternalCluster fail instead of skip when no
// etcd binary is found (set it in CI, where the binary must be installed).
const EnvRequireEtcd = "ALLOT_REQUIRE_ETCD"

// EnvEtcdBinary overrides the etcd binary path (default: "etcd" on PATH).
const EnvEtcdBinary = "ALLOT_ETCD_BINARY"

// EtcdBinary returns the etcd server binary to use, or "" if none is found.
func EtcdBinary() string {
	name := "etcd"
	if p := os.Getenv(EnvEtcdBinary); p != "" {
		name = p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

type member struct {
	name, clientURL, peerURL, dataDir, logPath string
	cmd                                        *exec.Cmd
	exited                                     chan struct{}
}

type cluster struct {
	t       testing.TB
	bin     string
	members []*member
	mu      sync.Mutex
}

// StartExternalCluster starts an n-member etcd cluster as child processes
// on free loopback ports with data in temp dirs, waits until it accepts
// writes, and kills the processes (by PID) in t.Cleanup. stop(i) kills
// member i. Without an etcd binary the test is skipped, or fails when
// ALLOT_REQUIRE_ETCD=1.
func StartExternalCluster(t testing.TB, n int) (endpoints []string, stop func(i int)) {
	t.Helper()
	bin := EtcdBinary()
	if bin == "" {
		msg := "etcd binary not found on PATH (Debian: apt-get install etcd-server; or set " + EnvEtcdBinary + ")"
		if os.Getenv(EnvRequireEtcd) == "1" {
			t.Fatalf("%s and %s=1", msg, EnvRequireEtcd)
		}
		t.Skip(msg)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c := &cluster{t: t, bin: bin}
		// Create the temp dir before registering the kill, so that the
		// (LIFO) cleanups kill the processes before removing their data.
		root := t.TempDir()
		t.Cleanup(c.killAll)
		if lastErr = c.start(root, n, attempt); lastErr == nil {
			eps := make([]string, n)
			for i, m := range c.members {
				eps[i] = m.clientURL
			}
			return eps, c.kill
		}
		c.dumpLogs()
		c.killAll()
		t.Logf("etcd cluster attempt %d failed: %v", attempt+1, lastErr)
	}
	t.Fatalf("start external etcd cluster: %v", lastErr)
	return nil, nil
}

func (c *cluster) start(root string, n, attempt int) error {
	ports, err := storage.FreePorts(2 * n)
	if err != nil {
		return err
	}
	var initial []string
	for i := range n {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dataDir:   filepath.Join(root, fmt.Sprintf("m%d", i)),
			logPath:   filepath.Join(root, fmt.Sprintf("m%d.log", i)),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	token := fmt.Sprintf("allot-test-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), attempt)
	for _, m := range c.members {
		if err := c.spawn(m, strings.Join(initial, ","), token); err != nil {
			return err
		}
	}
	return c.waitHealthy()
}

func (c *cluster) spawn(m *member, initialCluster, token string) error {
	logf, err := os.Create(m.logPath)
	if err != nil {
		return fmt.Errorf("create etcd log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(c.bin,
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL,
		"--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--logger", "zap",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.bin, err)
	}
	m.cmd = cmd
	m.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait() // exit status of a killed member is expected
		close(m.exited)
	}()
	return nil
}

// waitHealthy polls until a write through all endpoints succeeds.
func (c *cluster) waitHealthy() error {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL
	}
	deadline := time.Now().Add(90 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		for _, m := range c.members {
			select {
			case <-m.exited:
				return fmt.Errorf("etcd member %s exited during start", m.name)
			default:
			}
		}
		if lastErr = tryWrite(eps); lastErr == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("etcd cluster not healthy after 90s: %w", lastErr)
}

func tryWrite(eps []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := storage.NewClient(ctx, eps, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Put(ctx, "/storagetest/health", "ok")
	return err
}

// kill stops member i by PID: SIGTERM, then SIGKILL after 10s.
func (c *cluster) kill(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.members) {
		c.t.Errorf("stop etcd member %d: out of range", i)
		return
	}
	m := c.members[i]
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Logf("signal etcd member %s (pid %d): %v", m.name, m.cmd.Process.Pid, err)
	}
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill() // best effort; Wait below reports the end
		<-m.exited
	}
}

func (c *cluster) killAll() {
	for i := range c.members {
		c.kill(i)
	}
}

func (c *cluster) dumpLogs() {
	for _, m := range c.members {
		b, err := os.ReadFile(m.logPath)
		if err != nil {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		c.t.Logf("etcd member %s log tail:\n%s", m.name, bytes.TrimSpace(b))
	}
}
