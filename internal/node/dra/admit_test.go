package dra

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/pkg/client"
)

// admitOnce asks m once.
func admitOnce(m *Manager, pod *corev1.Pod) pods.Admission {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Admit(ctx, pod)
}

// waitHold asks m until it holds the pod with reason and a message
// containing part.
func waitHold(t *testing.T, m *Manager, pod *corev1.Pod, reason, part string) pods.Admission {
	t.Helper()
	var a pods.Admission
	eventually(t, fmt.Sprintf("hold %s %q", reason, part), func() (bool, string) {
		a = admitOnce(m, pod)
		return a.Verdict == pods.Hold && a.Reason == reason && strings.Contains(a.Message, part), a.Reason + ": " + a.Message
	})
	return a
}

func TestPodHeldUntilClaimAllocatedAndReserved(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	e.claim("gpu")
	pod := e.pod("p", "gpu")
	key := e.ns + "/gpu"

	waitHold(t, m, pod, ReasonWaitingForClaim, "claim "+key+" is not allocated")
	woken := e.wakes.count(pod.UID)
	e.allocate("gpu", gpuDriver)
	eventually(t, "pod woken by the allocation", func() (bool, string) { return e.wakes.count(pod.UID) > woken, "" })
	waitHold(t, m, pod, ReasonWaitingForClaim, "claim "+key+" is not reserved for the pod")
	woken = e.wakes.count(pod.UID)
	e.reserve("gpu", pod)
	eventually(t, "pod woken by the reservation", func() (bool, string) { return e.wakes.count(pod.UID) > woken, "" })
	wantAdmitted(t, admit(t, m, pod))

	calls := p.Prepared()
	if len(calls) != 1 || len(calls[0]) != 1 {
		t.Fatalf("prepare calls %v, want one with the claim", claimNames(calls))
	}
	c := calls[0][0]
	claim, err := e.admin.ResourceClaims(e.ns).Get(callCtx(t), "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if c.GetNamespace() != e.ns || c.GetName() != "gpu" || c.GetUid() != string(claim.UID) || c.GetResourceHandle() != "handle-of-gpu" {
		t.Fatalf("prepared claim %+v", c)
	}
	if got := containerDevices(t, m, pod); !slices.Equal(got, []string{dratest.DeviceFor("gpu")}) {
		t.Fatalf("CDI devices %q", got)
	}
	if n := metric(t, m, "dra_operations_duration_seconds", "driver", gpuDriver, "operation", opPrepare); n != 1 {
		t.Errorf("prepare duration samples = %v, want 1", n)
	}
	if n := metric(t, m, "dra_prepared_claims"); n != 1 {
		t.Errorf("dra_prepared_claims = %v, want 1", n)
	}
}

func TestHoldReasons(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	tmpl := "gpu-template"

	t.Run("missing claim", func(t *testing.T) {
		pod := e.pod("missing", "nothing")
		waitHold(t, m, pod, ReasonWaitingForClaim, "claim "+e.ns+"/nothing does not exist")
	})
	t.Run("template claim not created", func(t *testing.T) {
		pod := e.podWithTemplate("templated", "gpu", tmpl)
		a := admitOnce(m, pod)
		wantHold(t, a, ReasonWaitingForClaim, `the claim of entry "gpu" (template gpu-template) is not created yet`)

		// The claim controller records the generated claim's name.
		e.claim("templated-gpu-x1")
		e.allocate("templated-gpu-x1", gpuDriver)
		pod = e.recordClaim(pod, "gpu", "templated-gpu-x1")
		e.reserve("templated-gpu-x1", pod)
		waitHold(t, m, pod, ReasonDriverNotRegistered, "DRA driver "+gpuDriver+" is not registered")
	})
	t.Run("allocated for another node", func(t *testing.T) {
		e.claim("elsewhere")
		e.updateClaimStatus("elsewhere", func(c *resourcev1alpha2.ResourceClaim) {
			c.Status.DriverName = gpuDriver
			c.Status.Allocation = &resourcev1alpha2.AllocationResult{
				ResourceHandles:  []resourcev1alpha2.ResourceHandle{{DriverName: gpuDriver}},
				AvailableOnNodes: nodeSelector("dra-test", "somewhere-else"),
			}
		})
		pod := e.pod("elsewhere", "elsewhere")
		e.reserve("elsewhere", pod)
		waitHold(t, m, pod, ReasonWaitingForClaim, "is allocated on other nodes")
	})
	t.Run("driver registers", func(t *testing.T) {
		pod := e.readyPod("late", "late", "late.example.com")
		waitHold(t, m, pod, ReasonDriverNotRegistered, "late.example.com")
		woken := e.wakes.count(pod.UID)
		e.plugin(m, "late.example.com")
		eventually(t, "pod woken by the registration", func() (bool, string) { return e.wakes.count(pod.UID) > woken, "" })
		wantAdmitted(t, admitOnce(m, pod))
	})
}

// podWithTemplate creates a pod whose entry uses a claim template.
func (e *env) podWithTemplate(name, entry, template string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{}
	p.Name, p.Namespace = name, e.ns
	p.Spec.NodeName = e.node
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: entry, ResourceClaimTemplateName: &template}}
	p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox",
		Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: entry}}}}}
	out, err := e.admin.Pods(e.ns).Create(callCtx(e.t), p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

// recordClaim writes the generated claim's name in the pod's status, as
// the claim controller does.
func (e *env) recordClaim(pod *corev1.Pod, entry, claim string) *corev1.Pod {
	e.t.Helper()
	p := pod.DeepCopy()
	p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: &claim})
	out, err := e.admin.Pods(e.ns).UpdateStatus(callCtx(e.t), p)
	if err != nil {
		e.t.Fatalf("record claim of pod %s: %v", pod.Name, err)
	}
	return out
}

// countingPrepare fails the first n calls with msg, then prepares; it
// records when each call came.
type countingPrepare struct {
	mu    sync.Mutex
	n     int
	msg   string
	code  codes.Code
	calls []time.Time
}

func (c *countingPrepare) prepare(req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	c.mu.Lock()
	c.calls = append(c.calls, time.Now())
	fail := len(c.calls) <= c.n
	c.mu.Unlock()
	if fail {
		return dratest.PrepareError(c.msg, c.code)(req)
	}
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, cl := range req.GetClaims() {
		resp.Claims[cl.GetUid()] = &drapb.NodePrepareResourceResponse{CdiDevices: []string{dratest.DeviceFor(cl.GetName())}}
	}
	return resp, nil
}

func (c *countingPrepare) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func TestPrepareRetriedWithBackoff(t *testing.T) {
	e := newEnv(t)
	m := e.start() // back-off 300ms, then 600ms
	p := e.plugin(m, gpuDriver)
	cp := &countingPrepare{n: 2, msg: "device busy", code: codes.Unavailable}
	p.OnPrepare(cp.prepare)
	pod := e.readyPod("p", "gpu", gpuDriver)

	first := admit(t, m, pod)
	wantHold(t, first, ReasonPrepareFailed, "device busy", "attempt 1", "next attempt at")
	var holds []string
	eventually(t, "admitted after two failures", func() (bool, string) {
		a := admitOnce(m, pod)
		if a.Verdict == pods.Hold && !slices.Contains(holds, a.Message) {
			holds = append(holds, a.Message)
		}
		return a.Verdict == pods.Admit, a.Message
	})
	if len(holds) != 2 || !strings.Contains(holds[1], "attempt 2") {
		t.Fatalf("distinct holds %q, want attempts 1 and 2", holds)
	}
	calls := cp.times()
	if len(calls) != 3 {
		t.Fatalf("%d prepare calls, want 3", len(calls))
	}
	if d := calls[1].Sub(calls[0]); d < 300*time.Millisecond {
		t.Errorf("second attempt %s after the first, want the back-off of 300ms", d)
	}
	if d := calls[2].Sub(calls[1]); d < 600*time.Millisecond {
		t.Errorf("third attempt %s after the second, want the doubled back-off of 600ms", d)
	}
	// Each back-off ends with a wake-up of the pod's worker (a timer, which
	// may fire after this test's own polling admitted the pod).
	eventually(t, "a wake-up per back-off", func() (bool, string) {
		n := e.wakes.count(pod.UID)
		return n >= 2, fmt.Sprintf("pod woken %d times", n)
	})
	if n := metric(t, m, "dra_operation_errors_total", "driver", gpuDriver, "operation", opPrepare); n != 2 {
		t.Errorf("prepare errors = %v, want 2", n)
	}
}

func TestPrepareNotFoundRereadsClaim(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	cp := &countingPrepare{n: 1, msg: "no such instance", code: codes.NotFound}
	p.OnPrepare(cp.prepare)
	pod := e.readyPod("p", "gpu", gpuDriver)

	wantHold(t, admit(t, m, pod), ReasonPrepareFailed, "no such instance", "NOT_FOUND")
	// From now on the cache knows no claim: only a read from the API
	// server lets the retry find it.
	empty := client.NewLister[*resourcev1alpha2.ResourceClaim](cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		schema.GroupResource{Group: resourcev1alpha2.GroupName, Resource: "resourceclaims"})
	m.claims = &empty
	eventually(t, "admitted after re-reading the claim", func() (bool, string) {
		a := admitOnce(m, pod)
		return a.Verdict == pods.Admit, a.Message
	})
	if n := len(cp.times()); n != 2 {
		t.Fatalf("%d prepare calls, want 2", n)
	}
	// Without a NOT_FOUND, the (now empty) cache is what counts.
	other := e.readyPod("q", "other", gpuDriver)
	wantHold(t, admitOnce(m, other), ReasonWaitingForClaim, "does not exist")
}

func TestInvalidCDIDeviceIsAPrepareFailure(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	p.OnPrepare(func(req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
		resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
		for _, c := range req.GetClaims() {
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{CdiDevices: []string{"not a CDI name"}}
		}
		return resp, nil
	})
	pod := e.readyPod("p", "gpu", gpuDriver)
	wantHold(t, admit(t, m, pod), ReasonPrepareFailed, `CDI device "not a CDI name"`)
	if _, err := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("container options for a claim that failed to prepare, want an error")
	}
}
