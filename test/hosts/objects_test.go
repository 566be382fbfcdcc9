package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/test/chaos"
)

// namespace holds the suite's pods and claims.
const namespace = "default"

// Names of the suite's objects: a resource.k8s.io/v1 DeviceClass and
// template of one gpu.example.com device (node-local), and a v1alpha2
// template of one fabric.example.com unit (reachable from every node).
const (
	gpuClass       = "gpu"
	gpuTemplate    = "gpu"
	fabricTemplate = "fabric"
)

// setUp creates the classes, parameters and templates the pods use.
func (c *cluster) setUp(t *testing.T) {
	t.Helper()
	_, err := c.admin.DeviceClasses().Create(ctx(t), &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: gpuClass},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.example.com"`}}}}})
	if err != nil {
		t.Fatalf("create device class: %v", err)
	}
	_, err = c.admin.ResourceClaimTemplatesV1(namespace).Create(ctx(t), &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: gpuTemplate, Namespace: namespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuClass}}}}}}})
	if err != nil {
		t.Fatalf("create claim template: %v", err)
	}
	c.allot(t, "apply", "--kubeconfig", filepath.Join(c.data, "kubeconfig"), "-f", c.writeFile(t, "fabric.yaml", `apiVersion: fabric.example.com/v1alpha1
kind: FabricClaimParameters
metadata: {name: one, namespace: default}
spec: {count: 1, model: fpga-a}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimTemplate
metadata: {name: fabric, namespace: default}
spec:
  spec:
    resourceClassName: fabric.example.com
    parametersRef: {apiGroup: fabric.example.com, kind: FabricClaimParameters, name: one}
`))
}

// podOpt changes a pod made by newPod.
type podOpt func(*corev1.Pod)

// newPod is a busybox pod holding one gpu.example.com device (a claim
// from template gpu) that sleeps for an hour, with 1s to stop. It gets
// the API server's default tolerations of a lost node (300 s), so that a
// healthy node missing heartbeats on a loaded machine evicts nothing;
// the pods a scenario loses use tolerateLoss.
func newPod(name string, opts ...podOpt) *corev1.Pod {
	grace := int64(1)
	tmpl := gpuTemplate
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace,
			Containers:     []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: &tmpl}}},
	}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// tolerateLoss gives the pod its own tolerations of its node's loss,
// tm.toleration seconds (with the default timers none: the API server's
// 300 s): it is evicted that long after its node is tainted unreachable
// or not-ready.
func tolerateLoss(p *corev1.Pod) {
	if tm.toleration == 0 {
		return
	}
	secs := tm.toleration
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
	}
}

// onNode pins the pod to a node by its host label.
func onNode(n *node) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{hostLabel: n.name} }
}

// runFor makes the pod's container exit 0 after d, and not restart.
func runFor(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Command = []string{"sleep", fmt.Sprintf("%.1f", d.Seconds())}
	}
}

// fabricUnit makes the pod's claim one fabric.example.com unit instead.
func fabricUnit(p *corev1.Pod) {
	tmpl := fabricTemplate
	p.Spec.ResourceClaims[0].ResourceClaimTemplateName = &tmpl
}

func (c *cluster) createPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := c.admin.Pods(namespace).Create(ctx(t), p); err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

// pod gets a pod; nil when it does not exist.
func (c *cluster) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := c.admin.Pods(namespace).Get(ctx(t), name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Logf("get pod %s: %v", name, err)
		return &corev1.Pod{} // unknown: not gone
	}
	return p
}

// waitRunning waits until the pod runs and returns it.
func (c *cluster) waitRunning(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	waitFor(t, 60*time.Second, "pod "+name+" Running", func() bool {
		p = c.pod(t, name)
		return p != nil && p.Status.Phase == corev1.PodRunning
	})
	return p
}

// claimOf is the claim generated for the pod's one entry, by name and UID.
func (c *cluster) claimOf(t *testing.T, p *corev1.Pod) (name, uid string) {
	t.Helper()
	names := p.ResourceClaimNames()
	if len(names) != 1 {
		t.Fatalf("pod %s runs with claims %v, want one", p.Name, names)
	}
	_, claims := c.snapshot(t)
	for _, cl := range claims.V1 {
		if cl.Name == names[0] {
			return cl.Name, string(cl.UID)
		}
	}
	for _, cl := range claims.V1alpha2 {
		if cl.Name == names[0] {
			return cl.Name, string(cl.UID)
		}
	}
	t.Fatalf("pod %s's claim %s not found", p.Name, names[0])
	return "", ""
}

// claimReleased reports whether the claim is gone, or allocated to no
// one and reserved for no one.
func (c *cluster) claimReleased(t *testing.T, name string) bool {
	_, claims := c.snapshot(t)
	for _, cl := range claims.V1 {
		if cl.Name == name {
			return cl.Status.Allocation == nil && len(cl.Status.ReservedFor) == 0
		}
	}
	for _, cl := range claims.V1alpha2 {
		if cl.Name == name {
			return cl.Status.Allocation == nil && len(cl.Status.ReservedFor) == 0
		}
	}
	return true
}

// deletePods deletes the pods and waits until they are gone (their nodes
// stopped the containers and unprepared the claims).
func (c *cluster) deletePods(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := c.admin.Pods(namespace).Delete(ctx(t), n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete pod %s: %v", n, err)
		}
	}
	for _, n := range names {
		waitFor(t, 60*time.Second, "pod "+n+" gone", func() bool { return c.pod(t, n) == nil })
	}
}

// snapshot reads the namespace's pods and claims of both versions at one
// revision (a limited list pins it), views dropped, for the chaos suite's
// invariants.
func (c *cluster) snapshot(t *testing.T) ([]corev1.Pod, chaos.Claims) {
	t.Helper()
	pods, claims, err := c.trySnapshot(ctx(t))
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return pods, claims
}

func (c *cluster) trySnapshot(ctx context.Context) ([]corev1.Pod, chaos.Claims, error) {
	pods, err := c.admin.Pods(namespace).List(ctx, metav1.ListOptions{Limit: 100000})
	if err != nil {
		return nil, chaos.Claims{}, err
	}
	if pods.Continue != "" {
		return nil, chaos.Claims{}, errors.New("more pods than one page")
	}
	at := metav1.ListOptions{Limit: 100000, ResourceVersion: pods.ResourceVersion}
	v1alpha2, err := c.admin.ResourceClaims(namespace).List(ctx, at)
	if err != nil {
		return nil, chaos.Claims{}, err
	}
	v1, err := c.admin.ResourceClaimsV1(namespace).List(ctx, at)
	if err != nil {
		return nil, chaos.Claims{}, err
	}
	return pods.Items, chaos.StoredClaims(v1alpha2.Items, v1.Items), nil
}

// driverState is the node's gpu.example.com state file ("prepare UID
// NS/NAME DEVICES", "unprepare UID ...").
func (n *node) driverState(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(n.state)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// lastStateLine is the verb of the claim's last line in the node's
// driver state file ("prepare", "unprepare", or "" for none).
func (n *node) lastStateLine(t *testing.T, uid string) string {
	last := ""
	for _, l := range strings.Split(n.driverState(t), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[1] == uid {
			last = f[0]
		}
	}
	return last
}

// checkDriver reports the chaos suite's driver-record violations of the
// node: a claim prepared and never unprepared, a device prepared for a
// claim while another still held it.
func (n *node) checkDriver(t *testing.T) []chaos.Violation {
	state := n.driverState(t)
	return append(chaos.CheckDriverState(n.name, state, nil), chaos.CheckNoDevicePreparedTwice(n.name, state, true)...)
}

// containers lists the runc containers of the pod on the node: the
// runtime's records (ROOT/containers/POD_...) and runc's own state.
func (n *node) containers(t *testing.T, pod string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(filepath.Join(n.root, "containers"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), pod+"_") {
			out = append(out, "record "+e.Name())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := exec.CommandContext(ctx, "runc", "--root", filepath.Join(n.root, "runc"), "list", "-q").Output()
	if err != nil {
		t.Fatalf("runc list on %s: %v", n.name, err)
	}
	for _, id := range strings.Fields(string(list)) {
		if strings.HasPrefix(id, pod+"_") {
			out = append(out, "runc "+id)
		}
	}
	slices.Sort(out)
	return out
}

// running lists the pod's containers runc shows running on the node.
func (n *node) running(t *testing.T, pod string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "runc", "--root", filepath.Join(n.root, "runc"), "list", "--format", "json").Output()
	if err != nil {
		t.Fatalf("runc list on %s: %v", n.name, err)
	}
	var list []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("runc list on %s: %v: %s", n.name, err, out)
	}
	var ids []string
	for _, c := range list {
		if strings.HasPrefix(c.ID, pod+"_") && c.Status == "running" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// attached is the fabric units the node's plugin holds attached, unit
// to claim UID (the plugin's own record: a file per unit under a
// directory per claim).
func (n *node) attached(t *testing.T) map[string]string {
	t.Helper()
	out, err := n.readAttached()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// attachedNow is attached for a goroutine: what it can read.
func (n *node) attachedNow() map[string]string {
	out, _ := n.readAttached() // a claim's directory may go between the reads
	return out
}

func (n *node) readAttached() (map[string]string, error) {
	out := map[string]string{}
	claims, err := os.ReadDir(n.attach)
	if err != nil && !os.IsNotExist(err) {
		return out, err
	}
	for _, cl := range claims {
		units, err := os.ReadDir(filepath.Join(n.attach, cl.Name()))
		if err != nil && !os.IsNotExist(err) {
			return out, err
		}
		for _, u := range units {
			out[u.Name()] = cl.Name()
		}
	}
	return out, nil
}

// ctx is the test's context: requests end with the test.
func ctx(t *testing.T) context.Context { return t.Context() }

// waitFor polls cond every 50ms (recovery times are read off these
// polls) until it holds, failing the test after timeout (plus the
// timers' slack).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout += tm.slack
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
