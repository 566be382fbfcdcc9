package node

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/version"
)

// hostFacts are read once per process: simulated nodes share them.
type hostFacts struct {
	cpus         int
	memoryBytes  int64
	kernel       string
	osImage      string
	machineID    string
	bootID       string
	agentVersion string
}

var host = sync.OnceValue(readHostFacts)

func readHostFacts() hostFacts {
	// kubeletVersion has the form of the API server's gitVersion,
	// "v1.37.0+allot.v0.2.0" (version.GitVersion): Kubernetes shows kubelet
	// and API server versions alike (the VERSION column of `kubectl get
	// nodes`, `kubectl version`'s Server Version), so a node's allot
	// version reads beside the server's, and tools that parse
	// kubeletVersion as a semver to check kubelet skew find the API level
	// there, as they would from a kubelet.
	h := hostFacts{cpus: goruntime.NumCPU(), agentVersion: version.GitVersion()}
	h.memoryBytes = memTotal()
	h.kernel = readTrimmed("/proc/sys/kernel/osrelease")
	h.machineID = readTrimmed("/etc/machine-id")
	h.bootID = readTrimmed("/proc/sys/kernel/random/boot_id")
	h.osImage = osPrettyName()
	return h
}

func readTrimmed(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// memTotal reads MemTotal from /proc/meminfo (0 when unknown).
func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func osPrettyName() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return goruntime.GOOS
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return goruntime.GOOS
}

// capacity is the node's capacity: detected cpu and memory, pods, and the
// configured overrides.
func (c *Config) capacity() corev1.ResourceList {
	h := host()
	out := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(h.cpus), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(int64(c.MaxPods), resource.DecimalSI),
	}
	if h.memoryBytes > 0 {
		out[corev1.ResourceMemory] = *resource.NewQuantity(h.memoryBytes, resource.BinarySI)
	}
	for k, v := range c.Capacity {
		out[k] = v.DeepCopy()
	}
	return out
}

// DetectNodeIP returns the local address a connection to the API server
// at serverURL would use: an address the API server can reach back.
func DetectNodeIP(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse server URL: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	// UDP "dial" sends nothing; it only picks the route and source address.
	conn, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return "", fmt.Errorf("find route to %s: %w", u.Host, err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}
