package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstreamDriverName is the driver test/upstreamdriver registers.
const upstreamDriverName = "upstream.example.com"

var (
	upstreamBinOnce sync.Once
	upstreamBin     string
	upstreamBinErr  error
)

// buildUpstreamDriver builds test/upstreamdriver, a DRA driver built on
// k8s.io/dynamic-resource-allocation/kubeletplugin as it is, once per test
// binary.
func buildUpstreamDriver(t *testing.T) string {
	t.Helper()
	upstreamBinOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		upstreamBin = filepath.Join(binDir, "upstreamdriver")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", upstreamBin, "./test/upstreamdriver")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			upstreamBinErr = fmt.Errorf("build test/upstreamdriver: %v\n%s", err, out)
		}
	})
	if upstreamBinErr != nil {
		t.Fatal(upstreamBinErr)
	}
	return upstreamBin
}

// upstreamCluster is allot up (API server, controller manager,
// scheduler), an `allot node` with runc, and the upstream driver as a host
// process with a node-driver kubeconfig, its paths mapped to the node's
// as a kubelet's would be.
type upstreamCluster struct {
	*cluster
	nodeName   string
	root       string // the node's root dir
	registry   string // the node's plugins registry dir = the driver's registrar dir
	plugins    string // the driver's kubelet plugins dir
	cdiDir     string // one of the node's CDI spec dirs = the driver's CDI root
	stateFile  string
	holdFile   string
	healthFile string
	driverKC   string
	nodeArgs   []string
	node       *proc
	driver     *proc
	procs      []*proc // every driver started, stopped at cleanup
}

func newUpstreamCluster(t *testing.T, nodeName string, nodeArgs ...string) *upstreamCluster {
	t.Helper()
	return newUpstreamClusterWith(t, nodeName, nil, nodeArgs...)
}

// newUpstreamClusterWith is newUpstreamCluster whose first driver gets
// driverArgs too.
func newUpstreamClusterWith(t *testing.T, nodeName string, driverArgs []string, nodeArgs ...string) *upstreamCluster {
	t.Helper()
	requireRoot(t)
	buildUpstreamDriver(t)
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", nodeName)
	sock, err := os.MkdirTemp("", "udra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	u := &upstreamCluster{cluster: c, nodeName: nodeName, root: t.TempDir(), registry: filepath.Join(sock, "reg"),
		plugins: filepath.Join(sock, "plugins"), cdiDir: filepath.Join(sock, "cdi")}
	u.stateFile = filepath.Join(u.root, "driver-state")
	u.holdFile = filepath.Join(u.root, "hold")
	u.healthFile = filepath.Join(u.root, "health")
	for _, dir := range []string{u.registry, u.plugins, u.cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u.nodeArgs = []string{"--plugins-registry-dir", u.registry, "--cdi-spec-dir", u.cdiDir,
		"--dra-slice-grace-period", "2s", "--dra-prepare-backoff-initial", "100ms", "--dra-prepare-backoff-max", "500ms",
		"--admit-retry-interval", "200ms", "--terminated-pod-cleanup", "200ms"}
	u.nodeArgs = append(u.nodeArgs, nodeArgs...)
	u.node = c.startNode(t, nodeName, "runc", u.root, u.nodeArgs...)
	u.driverKC = c.tokenKubeconfig(t, "node-driver", upstreamDriverName+"@"+nodeName)
	t.Cleanup(func() {
		// The pods first, while the driver runs to unprepare their claims.
		if _, stderr, err := c.runKubectl("delete", "pods", "--all", "--all-namespaces", "--wait=true", "--timeout=90s"); err != nil {
			t.Logf("delete pods: %v: %s", err, stderr)
		}
		for _, p := range u.procs {
			if t.Failed() {
				t.Logf("upstream driver (pid %d) stderr:\n%s", p.PID(), tail(p.Stderr.String(), 6000))
			}
			_, _ = p.Terminate(stopGrace)
		}
	})
	u.startDriver(t, driverArgs...)
	waitFor(t, "the driver registered with the node agent", func() bool {
		for _, l := range strings.Split(u.node.Stderr.String(), "\n") {
			if strings.Contains(l, `msg="DRA driver registered"`) && strings.Contains(l, "driver="+upstreamDriverName+" ") &&
				strings.Contains(l, "service=v1.DRAPlugin") {
				return true
			}
		}
		return false
	})
	return u
}

// startDriver starts the upstream driver with the flags that map the
// kubelet's paths to the node agent's.
func (u *upstreamCluster) startDriver(t *testing.T, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--node-name", u.nodeName, "--kubeconfig", u.driverKC,
		"--kubelet-registrar-directory-path", u.registry, "--kubelet-plugins-directory-path", u.plugins,
		"--cdi-root", u.cdiDir, "--state-file", u.stateFile, "--prepare-hold-file", u.holdFile,
		"--health-file", u.healthFile}, extra...)
	p, err := startProc("upstream driver", childEnv(u.home), upstreamBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	u.procs = append(u.procs, p)
	u.driver = p
	return p
}

// stateLines counts the driver's state-file lines "VERB UID".
func (u *upstreamCluster) stateLines(t *testing.T, verb, uid string) int {
	return stateFileLines(t, u.stateFile, verb, uid)
}

// cdiSpecs lists the driver's CDI spec files.
func (u *upstreamCluster) cdiSpecs(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(u.cdiDir, upstreamDriverName+"-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// upstreamPod is a pod whose containers print the GPU_DEVICE_*
// variables the driver's CDI edits set; uses maps container name to the
// request it names ("" for the whole claim).
func upstreamPod(ns, name, claims string, containers ...[2]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  resourceClaims:
%s
  containers:
`, name, ns, claims)
	for _, c := range containers {
		req := ""
		if c[1] != "" {
			req = ", request: " + c[1]
		}
		fmt.Fprintf(&b, `  - name: %s
    image: busybox
    command: ["sh", "-c", "echo %s sees $(env | grep ^GPU_DEVICE_ | sort | tr '\\n' ' '); sleep 1000"]
    resources: {claims: [{name: gpu%s}]}
`, c[0], c[0], req)
	}
	return b.String()
}

// upstreamClass is the DeviceClass of the test driver's devices.
const upstreamClass = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: upstream-gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "upstream.example.com"'}
`

const upstreamClasses = upstreamClass + `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: up}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: upstream-gpu}
`

// devicesSeen is the GPU_DEVICE_* assignments a container printed.
func devicesSeen(line string) []string {
	_, after, _ := strings.Cut(line, " sees ")
	return strings.Fields(after)
}

// TestUpstreamDriver: a DRA driver built on the upstream kubeletplugin
// library, unmodified, runs as a host process on an allot node: it
// registers through the kubelet's API, publishes v1 ResourceSlices owned
// by the Node, pods in runc get the CDI edits it returned (distinct
// devices for two pods, one device for two containers of a shared claim,
// only the named request's device for a container that names one), and
// deleting the pods unprepares and removes the driver's CDI specs.
func TestUpstreamDriver(t *testing.T) {
	t.Parallel()
	u := newUpstreamCluster(t, "upstream-node")
	waitFor(t, "the driver's v1 slice, owned by the Node", func() bool {
		out := u.jsonpath(t, "{.items[*].spec.driver} {.items[*].metadata.ownerReferences[0].kind} {.items[*].spec.pool.name}",
			"resourceslices", "--field-selector", "spec.nodeName="+u.nodeName)
		return out == upstreamDriverName+" Node "+u.nodeName
	})
	u.applyYAML(t, namespace("up")+"---\n"+upstreamClasses)

	// Two pods, one GPU each from a template: distinct devices.
	u.applyYAML(t, upstreamPod("up", "a", "  - {name: gpu, resourceClaimTemplateName: one-gpu}", [2]string{"main", ""}))
	u.applyYAML(t, upstreamPod("up", "b", "  - {name: gpu, resourceClaimTemplateName: one-gpu}", [2]string{"main", ""}))
	seenA, seenB := devicesSeen(u.logLine(t, "up", "a", "main")), devicesSeen(u.logLine(t, "up", "b", "main"))
	if len(seenA) != 1 || len(seenB) != 1 || seenA[0] == seenB[0] {
		t.Fatalf("pods a and b see %q and %q, want one distinct GPU each", seenA, seenB)
	}
	u.kubectl(t, "delete", "pod", "a", "b", "-n", "up", "--wait=true", "--timeout=60s")
	waitFor(t, "the CDI specs of a and b removed", func() bool { return len(u.cdiSpecs(t)) == 0 })

	// A claim shared by two containers of one pod and a second pod: one
	// device for all of them, prepared once.
	u.applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: up}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: upstream-gpu}
---
`+upstreamPod("up", "s1", "  - {name: gpu, resourceClaimName: shared}", [2]string{"one", ""}, [2]string{"two", ""})+"---\n"+
		upstreamPod("up", "s2", "  - {name: gpu, resourceClaimName: shared}", [2]string{"three", ""}))
	one, two, three := devicesSeen(u.logLine(t, "up", "s1", "one")), devicesSeen(u.logLine(t, "up", "s1", "two")), devicesSeen(u.logLine(t, "up", "s2", "three"))
	if len(one) != 1 || fmt.Sprint(one) != fmt.Sprint(two) || fmt.Sprint(one) != fmt.Sprint(three) {
		t.Fatalf("containers of the shared claim see %q, %q and %q, want the same one GPU", one, two, three)
	}
	sharedUID := u.jsonpath(t, "{.metadata.uid}", "resourceclaim", "shared", "-n", "up")
	if n := u.stateLines(t, "prepare", sharedUID); n != 1 {
		t.Errorf("the shared claim was prepared %d times, want once", n)
	}
	u.kubectl(t, "delete", "pod", "s1", "s2", "-n", "up", "--wait=true", "--timeout=60s")
	waitFor(t, "the shared claim unprepared", func() bool { return u.stateLines(t, "unprepare", sharedUID) == 1 })

	// Two requests; each container names one and sees only its device.
	u.applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: pair, namespace: up}
spec:
  devices:
    requests:
    - {name: first, exactly: {deviceClassName: upstream-gpu}}
    - {name: second, exactly: {deviceClassName: upstream-gpu}}
---
`+upstreamPod("up", "pair", "  - {name: gpu, resourceClaimName: pair}", [2]string{"first", "first"}, [2]string{"second", "second"}, [2]string{"both", ""}))
	first, second, both := devicesSeen(u.logLine(t, "up", "pair", "first")), devicesSeen(u.logLine(t, "up", "pair", "second")), devicesSeen(u.logLine(t, "up", "pair", "both"))
	if len(first) != 1 || len(second) != 1 || first[0] == second[0] || len(both) != 2 {
		t.Fatalf("request containers see %q and %q, the whole-claim container %q; want one distinct GPU each and both", first, second, both)
	}
	// PodResources reports each container's DRA devices.
	firstDevice := strings.SplitN(first[0], "=", 2)[1] // GPU_DEVICE_i=gpu-i
	pairUID := u.jsonpath(t, "{.metadata.uid}", "resourceclaim", "pair", "-n", "up")
	want := fmt.Sprintf("up/pair %s %s %s %s/gpu=%s-%s", upstreamDriverName, u.nodeName, firstDevice, upstreamDriverName, pairUID, firstDevice)
	if got := podResourcesDRA(t, filepath.Join(u.root, "pod-resources.sock"), "up", "pair", "first"); got != want {
		t.Errorf("PodResources of pair/first: %q, want %q", got, want)
	}

	// The driver reports that device unhealthy: the container's status
	// shows it, and the pod fails (the node's default FailPod policy).
	if err := os.WriteFile(u.healthFile, []byte(firstDevice+" Unhealthy ECC errors\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod pair Failed", func() bool { return u.jsonpath(t, "{.status.phase}", "pod", "pair", "-n", "up") == "Failed" })
	if r, m := u.jsonpath(t, "{.status.reason}", "pod", "pair", "-n", "up"), u.jsonpath(t, "{.status.message}", "pod", "pair", "-n", "up"); r != "DeviceUnhealthy" ||
		!strings.Contains(m, firstDevice) || !strings.Contains(m, "ECC errors") {
		t.Errorf("failed pod: reason %q message %q, want DeviceUnhealthy naming %s and the driver's message", r, m, firstDevice)
	}
	u.kubectl(t, "delete", "pod", "pair", "-n", "up", "--wait=true", "--timeout=60s")
	waitFor(t, "every CDI spec removed", func() bool { return len(u.cdiSpecs(t)) == 0 })
}

// podResourcesDRA asks the node's PodResources API (List) for the DRA
// devices of a container: "NS/CLAIM DRIVER POOL DEVICE CDI..." per
// device, joined with "; ".
func podResourcesDRA(t *testing.T, socket, ns, pod, container string) string {
	t.Helper()
	var out []string
	for _, p := range listPodResources(t, socket) {
		if p.GetName() != pod || p.GetNamespace() != ns {
			continue
		}
		for _, c := range p.GetContainers() {
			if c.GetName() != container {
				continue
			}
			for _, dr := range c.GetDynamicResources() {
				for _, r := range dr.GetClaimResources() {
					s := fmt.Sprintf("%s/%s %s %s %s", dr.GetClaimNamespace(), dr.GetClaimName(), r.GetDriverName(), r.GetPoolName(), r.GetDeviceName())
					for _, cdi := range r.GetCdiDevices() {
						s += " " + cdi.GetName()
					}
					out = append(out, s)
				}
			}
		}
	}
	return strings.Join(out, "; ")
}

// TestUpstreamDriverKilled: kill -9 of the driver, then of the node
// agent, each in the middle of a prepare, then a restart: the prepare is
// retried to success, the container gets its device once, deleting the
// pod unprepares after the last prepare, and nothing is left behind. A
// rolling update (a second instance with the library's RollingUpdate
// sockets, then kill -9 of the first) loses nothing. A driver gone for
// longer than the grace period loses its slices, which come back with it.
func TestUpstreamDriverKilled(t *testing.T) {
	t.Parallel()
	u := newUpstreamCluster(t, "upstream-kill")
	u.applyYAML(t, namespace("up")+"---\n"+upstreamClasses)
	outer := t // a node agent started again must outlive the subtest

	for _, victim := range []string{"driver", "node agent"} {
		t.Run("kill -9 of the "+victim, func(t *testing.T) {
			if err := os.WriteFile(u.holdFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			pod := strings.ReplaceAll("kill-"+victim, " ", "-")
			from := len(u.driver.Stderr.String())
			u.applyYAML(t, upstreamPod("up", pod, "  - {name: gpu, resourceClaimTemplateName: one-gpu}", [2]string{"main", ""}))
			waitFor(t, "the driver holding the prepare", func() bool {
				return strings.Contains(u.driver.Stderr.String()[from:], "prepare held")
			})
			if victim == "driver" {
				u.driver.Kill()
			} else {
				u.node.Kill()
			}
			if err := os.Remove(u.holdFile); err != nil {
				t.Fatal(err)
			}
			if victim == "driver" {
				u.startDriver(t)
			} else {
				u.node = u.startNode(outer, u.nodeName, "runc", u.root, u.nodeArgs...)
			}
			waitFor(t, "pod "+pod+" Running", func() bool {
				return u.jsonpath(t, "{.status.phase}", "pod", pod, "-n", "up") == "Running"
			})
			if seen := devicesSeen(u.logLine(t, "up", pod, "main")); len(seen) != 1 {
				t.Fatalf("the container sees %q, want one GPU once", seen)
			}
			claim := u.jsonpath(t, "{.status.resourceClaimStatuses[0].resourceClaimName}", "pod", pod, "-n", "up")
			uid := u.jsonpath(t, "{.metadata.uid}", "resourceclaim", claim, "-n", "up")
			u.kubectl(t, "delete", "pod", pod, "-n", "up", "--wait=true", "--timeout=60s")
			waitFor(t, "the claim unprepared after its last prepare", func() bool {
				return u.lastVerb(t, uid) == "unprepare"
			})
			waitFor(t, "no CDI spec left", func() bool { return len(u.cdiSpecs(t)) == 0 })
		})
	}

	t.Run("rolling update", func(t *testing.T) {
		old := u.driver
		from := len(u.node.Stderr.String())
		u.startDriver(t, "--rolling-update-uid", "0f9e5e2c-roll")
		waitFor(t, "the new instance registered beside the old one", func() bool {
			return strings.Contains(u.node.Stderr.String()[from:], "dra-0f9e5e2c-roll.sock")
		})
		old.Kill()
		u.applyYAML(t, upstreamPod("up", "rolled", "  - {name: gpu, resourceClaimTemplateName: one-gpu}", [2]string{"main", ""}))
		if seen := devicesSeen(u.logLine(t, "up", "rolled", "main")); len(seen) != 1 {
			t.Fatalf("the container sees %q, want one GPU", seen)
		}
		u.kubectl(t, "delete", "pod", "rolled", "-n", "up", "--wait=true", "--timeout=60s")
		waitFor(t, "no CDI spec left", func() bool { return len(u.cdiSpecs(t)) == 0 })
	})

	t.Run("slices go with the driver and come back", func(t *testing.T) {
		slices := func() string {
			return u.jsonpath(t, "{.items[*].spec.driver}", "resourceslices", "--field-selector", "spec.nodeName="+u.nodeName)
		}
		waitFor(t, "the driver's slice", func() bool { return slices() == upstreamDriverName })
		if _, err := u.driver.Terminate(stopGrace); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the slice removed after the grace period", func() bool { return slices() == "" })
		u.startDriver(t)
		waitFor(t, "the slice published again", func() bool { return slices() == upstreamDriverName })
	})
}

// lastVerb is the verb of the driver's last state-file line for uid.
func (u *upstreamCluster) lastVerb(t *testing.T, uid string) string {
	t.Helper()
	data, err := os.ReadFile(u.stateFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	last := ""
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[1] == uid {
			last = f[0]
		}
	}
	return last
}

// TestUpstreamDriverCredentials: a node-driver token of one node can
// neither read the claims of pods on another node nor write or list that
// node's slices. Under the Report policy, a device the driver reports
// unhealthy shows in the container's allocatedResourcesStatus and the pod
// keeps running.
func TestUpstreamDriverCredentials(t *testing.T) {
	t.Parallel()
	u := newUpstreamCluster(t, "upstream-creds", "--unhealthy-device-policy", "Report")
	u.applyYAML(t, namespace("up")+"---\n"+upstreamClasses+"---\n"+
		upstreamPod("up", "p", "  - {name: gpu, resourceClaimTemplateName: one-gpu}", [2]string{"main", ""}))
	device := strings.SplitN(devicesSeen(u.logLine(t, "up", "p", "main"))[0], "=", 2)[1]
	status := func() string {
		return u.jsonpath(t, `{.status.containerStatuses[0].allocatedResourcesStatus[0].name} `+
			`{.status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].resourceID} `+
			`{.status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].health}`, "pod", "p", "-n", "up")
	}
	resource := fmt.Sprintf("claim:gpu %s/%s/%s ", upstreamDriverName, u.nodeName, device)
	waitFor(t, "the device Healthy in the pod's status", func() bool { return status() == resource+"Healthy" })
	if err := os.WriteFile(u.healthFile, []byte(device+" Unhealthy ECC errors\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the device Unhealthy in the pod's status", func() bool { return status() == resource+"Unhealthy" })
	if phase := u.jsonpath(t, "{.status.phase}", "pod", "p", "-n", "up"); phase != "Running" {
		t.Errorf("pod p is %s under the Report policy, want Running", phase)
	}

	claim := u.jsonpath(t, "{.status.resourceClaimStatuses[0].resourceClaimName}", "pod", "p", "-n", "up")
	other := u.tokenKubeconfig(t, "node-driver", upstreamDriverName+"@another-node")
	slice := u.jsonpath(t, "{.items[0].metadata.name}", "resourceslices", "--field-selector", "spec.nodeName="+u.nodeName)
	for _, args := range [][]string{
		{"get", "resourceclaim", claim, "-n", "up"},
		{"get", "resourceslices"},
		{"get", "resourceslices", "--field-selector", "spec.driver=" + upstreamDriverName + ",spec.nodeName=" + u.nodeName},
		{"delete", "resourceslice", slice},
		{"label", "resourceslice", slice, "stolen=yes"},
	} {
		_, stderr, err := u.runKubectl(append([]string{"--kubeconfig", other}, args...)...)
		if err == nil || !strings.Contains(stderr, "Forbidden") {
			t.Errorf("kubectl %s as another node's driver: err %v, stderr %q; want Forbidden", strings.Join(args, " "), err, stderr)
		}
	}
	// Its own node's driver may read the claim.
	if _, stderr, err := u.runKubectl("--kubeconfig", u.driverKC, "get", "resourceclaim", claim, "-n", "up"); err != nil {
		t.Errorf("the node's own driver reading the claim: %v: %s", err, stderr)
	}
}
