package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/dra"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/pkg/client"
)

const draDriver = "gpu.example.com"

// recordingRuntime remembers the specs of the containers it creates.
type recordingRuntime struct {
	runtime.Runtime
	mu    sync.Mutex
	specs []runtime.ContainerSpec
}

func (r *recordingRuntime) Create(ctx context.Context, s runtime.ContainerSpec) (string, error) {
	r.mu.Lock()
	r.specs = append(r.specs, s)
	r.mu.Unlock()
	return r.Runtime.Create(ctx, s)
}

// cdiDevices returns the CDI devices of the last attempt of container
// name of pod.
func (r *recordingRuntime) cdiDevices(pod, name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.specs {
		if s.PodName == pod && s.Name == name {
			out = s.CDIDevices
		}
	}
	return out
}

// draAgent starts an agent with a DRA manager on a fresh registry
// directory and a plugin for draDriver registered with it.
func draAgent(t *testing.T, c *client.Client, name string) (*recordingRuntime, *dratest.Plugin) {
	t.Helper()
	cfg := agentConfig(t, c, name, t.TempDir())
	registry := dratest.ShortTempDir(t)
	cfg.PluginsRegistryDir = registry
	cfg.DRASliceGracePeriod, cfg.DRAPrepareBackoffInitial, cfg.DRAPrepareBackoffMax = time.Second, 100*time.Millisecond, 400*time.Millisecond
	rec := &recordingRuntime{Runtime: cfg.Runtime}
	cfg.Runtime = rec
	startAgent(t, cfg)
	waitNodeReady(t, c, name)
	p := dratest.Start(t, dratest.Options{Name: draDriver, RegistryDir: registry,
		Model: []byte(`{"partitionable":{"resourceInstances":[{"name":"gpu-0"}]}}`)})
	if st := p.Status(t); !st.PluginRegistered {
		t.Fatalf("plugin refused: %s", st.Error)
	}
	return rec, p
}

func claimPod(ns, name, nodeName, claim string) *podBuilder {
	b := makePod(ns, name, nodeName)
	b.p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	b.p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return b
}

func createClaim(t *testing.T, c *client.Client, ns, name string) *resourcev1alpha2.ResourceClaim {
	t.Helper()
	out, err := c.ResourceClaims(ns).Create(callContext(t), &resourcev1alpha2.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"}})
	if err != nil {
		t.Fatalf("create claim: %v", err)
	}
	return out
}

func waitingReason(p *corev1.Pod) string {
	if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil {
		return cs[0].State.Waiting.Reason
	}
	return ""
}

func TestDRAPodHeldThenRunsWithClaimDevices(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	rec, p := draAgent(t, c, name)

	eventually(t, 30*time.Second, "slice published", func() (bool, string) {
		l, err := c.NodeResourceSlices().List(callContext(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 1 && l.Items[0].Spec.DriverName == draDriver, fmt.Sprint(len(l.Items), " slices")
	})

	createClaim(t, c, ns, "gpu-claim")
	pod := claimPod(ns, "worker", name, "gpu-claim").create(t, c)
	waitPod(t, c, ns, "worker", "held for its claim", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && waitingReason(p) == dra.ReasonWaitingForClaim
	})
	eventually(t, 30*time.Second, "hold event", func() (bool, string) {
		l, err := c.Events(ns).List(callContext(t), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range l.Items {
			if ev.InvolvedObject.Name == "worker" && ev.Reason == dra.ReasonWaitingForClaim && strings.Contains(ev.Message, "not allocated") {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(l.Items), " events")
	})

	// The scheduler's part, played by the test: allocate, then reserve.
	cl, err := c.ResourceClaims(ns).Get(callContext(t), "gpu-claim")
	if err != nil {
		t.Fatal(err)
	}
	cl.Status.DriverName = draDriver
	cl.Status.Allocation = &resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: draDriver, Data: "gpu-0"}}}
	cl.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "worker", UID: pod.UID}}
	if _, err := c.ResourceClaims(ns).UpdateStatus(callContext(t), cl); err != nil {
		t.Fatalf("allocate and reserve: %v", err)
	}
	waitPod(t, c, ns, "worker", "Running", running)
	if got := rec.cdiDevices("worker", "main"); !slices.Equal(got, []string{dratest.DeviceFor("gpu-claim")}) {
		t.Fatalf("container CDI devices %q", got)
	}

	if err := c.Pods(ns).Delete(callContext(t), "worker", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitPodGone(t, c, ns, "worker")
	if n := len(p.Unprepared()); n != 1 {
		t.Fatalf("%d unprepare calls, want 1 before the deletion completed", n)
	}
}

func TestDRAFinishedPodUnpreparedAndMarked(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	_, p := draAgent(t, c, name)

	// Bound the way the scheduler binds: node, structured allocation and
	// reservation in one pods/binding write.
	cl := createClaim(t, c, ns, "job-claim")
	b := claimPod(ns, "job", "", "job-claim").exitAfter("300ms", 0).policy(corev1.RestartPolicyNever)
	b.create(t, c)
	alloc, err := json.Marshal(resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{
		DriverName: draDriver,
		StructuredData: &resourcev1alpha2.StructuredResourceHandle{NodeName: name,
			Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{{ID: "gpu-0"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bind(callContext(t), ns, "job", &corev1.Binding{
		ObjectMeta:       metav1.ObjectMeta{Name: "job"},
		Target:           corev1.ObjectReference{Kind: "Node", Name: name},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: "job-claim", DriverName: draDriver, Allocation: &k8sruntime.RawExtension{Raw: alloc}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: name, DriverName: draDriver, Revision: cl.ResourceVersion}},
	}); err != nil {
		t.Fatalf("bind: %v", err)
	}

	done := waitPod(t, c, ns, "job", "Succeeded and unprepared", func(p *corev1.Pod) bool {
		c := condition(p, corev1.PodResourceClaimsUnprepared)
		return p.Status.Phase == corev1.PodSucceeded && c != nil && c.Status == corev1.ConditionTrue
	})
	if condition(done, corev1.PodReady) == nil || condition(done, corev1.PodInitialized) == nil {
		t.Fatalf("conditions %+v: the agent's own conditions are missing", done.Status.Conditions)
	}
	calls := p.Prepared()
	if len(calls) != 1 || !strings.Contains(string(calls[0][0].GetStructuredResourceHandle()), `"nodeName":"`+name+`"`) {
		t.Fatalf("prepare calls %v, want one with the structured handle", calls)
	}
	if n := len(p.Unprepared()); n != 1 {
		t.Fatalf("%d unprepare calls, want 1", n)
	}
	// The claim controller may now drop the finished pod's reservation.
	eventually(t, 30*time.Second, "reservation released", func() (bool, string) {
		cur, err := c.ResourceClaims(ns).Get(callContext(t), "job-claim")
		if err != nil {
			return false, err.Error()
		}
		return len(cur.Status.ReservedFor) == 0, fmt.Sprintf("reservedFor %+v", cur.Status.ReservedFor)
	})
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
