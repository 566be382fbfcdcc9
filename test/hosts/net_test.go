package hosts

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// network is the test's private network: a bridge in the test's own
// network namespace holding the control plane's address, and a host (a
// network namespace of its own) per node, joined to the bridge by a veth
// pair. Names derive from the test process's PID, so that runs side by
// side do not collide, and cleanup removes only what this test made.
type network struct {
	bridge string
	subnet string // first three octets, "100.A.B"
	gw     string // the bridge's address: the API server listens here
	hosts  []*host
}

// host is one network namespace with its end of a veth pair, eth0.
type host struct {
	name  string // the namespace, as `ip netns` names it
	ip    string
	veth  string // the bridge's end, in the test's namespace
	index int
}

// newNetwork makes the bridge and n hosts; t.Cleanup removes them (even
// when a step fails halfway).
func newNetwork(t *testing.T, n int) *network {
	t.Helper()
	pid := os.Getpid()
	// 100.64.0.0/10 (shared address space) is routed nowhere here; one /24
	// per PID (mod 2^14).
	nw := &network{bridge: fmt.Sprintf("alh%d", pid), subnet: fmt.Sprintf("100.%d.%d", 64+(pid>>8)&63, pid&255)}
	nw.gw = nw.subnet + ".1"
	t.Cleanup(func() { nw.remove(t) })
	ipCmd(t, "link", "add", nw.bridge, "type", "bridge")
	ipCmd(t, "addr", "add", nw.gw+"/24", "dev", nw.bridge)
	ipCmd(t, "link", "set", nw.bridge, "up")
	for i := range n {
		h := &host{name: fmt.Sprintf("allot-hosts-%d-%d", pid, i), ip: fmt.Sprintf("%s.%d", nw.subnet, 10+i),
			veth: fmt.Sprintf("alh%dv%d", pid, i), index: i}
		nw.hosts = append(nw.hosts, h)
		ipCmd(t, "netns", "add", h.name)
		ipCmd(t, "-n", h.name, "link", "set", "lo", "up")
		ipCmd(t, "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.name)
		ipCmd(t, "link", "set", h.veth, "master", nw.bridge)
		ipCmd(t, "link", "set", h.veth, "up")
		ipCmd(t, "-n", h.name, "addr", "add", h.ip+"/24", "dev", "eth0")
		ipCmd(t, "-n", h.name, "link", "set", "eth0", "up")
	}
	return nw
}

// remove deletes the hosts' namespaces and veths and the bridge, each
// by its own name; missing ones are fine (a failed set-up).
func (nw *network) remove(t *testing.T) {
	for _, h := range nw.hosts {
		ipQuiet(t, "link", "del", h.veth) // takes eth0 with it
		ipQuiet(t, "netns", "del", h.name)
	}
	ipQuiet(t, "link", "del", nw.bridge)
}

// cut takes the host's link down inside its own namespace: nothing
// reaches the control plane from it, nor it from there. The test's own
// namespace is untouched.
func (h *host) cut(t *testing.T) { t.Helper(); ipCmd(t, "-n", h.name, "link", "set", "eth0", "down") }

// restore brings the host's link up again.
func (h *host) restore(t *testing.T) { t.Helper(); ipCmd(t, "-n", h.name, "link", "set", "eth0", "up") }

// command is the argv that runs bin with args inside the host's network
// namespace (nsenter execs bin: the PID is bin's, and only the network
// namespace differs from the test's).
func (h *host) command(bin string, args ...string) []string {
	return append([]string{"--net=/run/netns/" + h.name, "--", bin}, args...)
}

// freePort picks a free TCP port on addr.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := runIP(args...); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// ipQuiet runs ip for cleanup: a missing device or namespace is fine,
// anything else is logged.
func ipQuiet(t *testing.T, args ...string) {
	if out, err := runIP(args...); err != nil && !strings.Contains(out, "Cannot find device") && !strings.Contains(out, "No such file") {
		t.Logf("cleanup: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func runIP(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	return string(out), err
}
