package resourceclaim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
	"allot.dev/allot/pkg/client"
)

func newNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func (e *env) createTemplate(name string) {
	e.t.Helper()
	tmpl := &resourcev1alpha2.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1alpha2.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "test"}},
			Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"},
		}}
	if _, err := e.c.ResourceClaimTemplates(e.ns).Create(e.ctx, tmpl); err != nil {
		e.t.Fatalf("create template: %v", err)
	}
}

func (e *env) createPod(p *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	p.Namespace, p.UID = e.ns, ""
	out, err := e.c.Pods(e.ns).Create(e.ctx, p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return out
}

func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.c.Pods(e.ns).Get(e.ctx, name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// claim reads a claim; nil when it does not exist.
func (e *env) claim(name string) *resourcev1alpha2.ResourceClaim {
	e.t.Helper()
	c, err := e.c.ResourceClaims(e.ns).Get(e.ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get claim %s: %v", name, err)
	}
	return c
}

func (e *env) claims() []resourcev1alpha2.ResourceClaim {
	e.t.Helper()
	l, err := e.c.ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list claims: %v", err)
	}
	return l.Items
}

// recordedClaim is the claim name in the pod's status for entry, or "".
func (e *env) recordedClaim(pod, entry string) string {
	for _, s := range e.pod(pod).Status.ResourceClaimStatuses {
		if s.Name == entry && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

func (e *env) deletePod(name string, grace *int64) {
	e.t.Helper()
	err := e.c.Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatalf("delete pod %s: %v", name, err)
	}
}

func TestTemplateClaimCreatedOnceAndRecorded(t *testing.T) {
	e := newEnv(t)
	e.createTemplate("gpu-tmpl")
	_, stop := e.startController()
	pod := e.createPod(makePod("web").template("gpu", "gpu-tmpl").obj())
	e.eventually("the claim is recorded in the pod's status", func() bool { return e.recordedClaim("web", "gpu") != "" })
	name := e.recordedClaim("web", "gpu")
	if !strings.HasPrefix(name, "web-gpu-") {
		t.Fatalf("claim name %q lacks the generateName prefix web-gpu-", name)
	}
	claim := e.claim(name)
	ref := metav1.GetControllerOf(claim)
	switch {
	case ref == nil || ref.UID != pod.UID || ref.Kind != "Pod" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion:
		t.Fatalf("claim's controller reference %+v, want the pod %s", ref, pod.UID)
	case claim.Labels["app"] != "test" || claim.Spec.ResourceClassName != "gpu" || claim.Annotations[resourcev1alpha2.PodClaimNameAnnotation] != "gpu":
		t.Fatalf("claim not built from the template: %+v", claim.ObjectMeta)
	}

	// A restarted controller finds the recorded claim and creates none.
	stop()
	e.startController()
	e.consistently("exactly one claim exists", time.Second, func() bool { return len(e.claims()) == 1 })
}

func TestLostStatusWriteAdoptsOwnClaimOnly(t *testing.T) {
	e := newEnv(t)
	e.createTemplate("gpu-tmpl")
	pod := e.createPod(makePod("web").template("gpu", "gpu-tmpl").obj())
	// A claim the controller created before its status write was lost,
	// and an unrelated one with the same annotation but another owner.
	tmpl, err := e.c.ResourceClaimTemplates(e.ns).Get(e.ctx, "gpu-tmpl")
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.c.ResourceClaims(e.ns).Create(e.ctx, newClaimFromTemplate(pod, "gpu", tmpl))
	if err != nil {
		t.Fatal(err)
	}
	stranger := newClaimFromTemplate(makePod("other").obj(), "gpu", tmpl)
	stranger.Name, stranger.GenerateName, stranger.Namespace = "", "web-gpu-", e.ns
	if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, stranger); err != nil {
		t.Fatal(err)
	}
	e.startController()
	e.eventually("the claim is recorded", func() bool { return e.recordedClaim("web", "gpu") != "" })
	if got := e.recordedClaim("web", "gpu"); got != own.Name {
		t.Fatalf("recorded claim %q, want the pod's own %q", got, own.Name)
	}
	e.consistently("no third claim is created", 500*time.Millisecond, func() bool { return len(e.claims()) == 2 })
}

// A create whose answer was lost (the API server killed after its commit)
// and whose claim the cache has not seen yet: the retry finds the claim by
// its name and uses it instead of making a second one. A claim of that
// name that is not the pod's is never taken.
func TestRetriedCreateFindsItsClaim(t *testing.T) {
	e := newEnv(t)
	e.createTemplate("gpu-tmpl")
	// Not running: its cache stays empty, as after a lost answer.
	ctrl, err := New(e.c, client.NewFactory(e.c, 0), Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctrl.events = client.NewEventRecorder(e.c, "test", "test")
	t.Cleanup(func() { ctrl.events.Shutdown(e.ctx) })
	pod := e.createPod(makePod("web").template("gpu", "gpu-tmpl").obj())
	tmpl, err := e.c.ResourceClaimTemplates(e.ns).Get(e.ctx, "gpu-tmpl")
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.c.ResourceClaims(e.ns).Create(e.ctx, newClaimFromTemplate(pod, "gpu", tmpl))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ctrl.claimFor(e.ctx, pod, pod.Spec.ResourceClaims[0])
	if err != nil || got != first.Name {
		t.Fatalf("claimFor after a lost answer = %q, %v; want the first claim %q", got, err, first.Name)
	}
	if n := len(e.claims()); n != 1 {
		t.Fatalf("%d claims for one entry of one pod", n)
	}

	other := e.createPod(makePod("other").template("gpu", "gpu-tmpl").obj())
	squatter := newClaimFromTemplate(pod, "gpu", tmpl)
	squatter.Name = allocator.GeneratedClaimName(other, "gpu")
	if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, squatter); err != nil {
		t.Fatal(err)
	}
	if got, err := ctrl.claimFor(e.ctx, other, other.Spec.ResourceClaims[0]); err == nil || !strings.Contains(err.Error(), "is not the pod's") {
		t.Fatalf("claimFor with another pod's claim in the way = %q, %v; want an error", got, err)
	}
}

// TestRecordClaimsOnStaleCachedPod: the status write starts from the pod
// as the cache shows it; when that copy is stale, the conflict makes it
// read the pod again, and nothing written meanwhile is lost.
func TestRecordClaimsOnStaleCachedPod(t *testing.T) {
	e := newEnv(t)
	// Not running: the test makes the one call itself.
	ctrl, err := New(e.c, client.NewFactory(e.c, 0), Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	stale := e.createPod(makePod("web").template("gpu", "gpu-tmpl").obj())
	cur := stale.DeepCopy()
	cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: "Other", Status: corev1.ConditionTrue})
	if _, err := e.c.Pods(e.ns).UpdateStatus(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.recordClaims(e.ctx, stale, map[string]string{"gpu": "web-gpu-x"}); err != nil {
		t.Fatalf("recordClaims on a stale pod: %v", err)
	}
	got := e.pod("web")
	if e.recordedClaim("web", "gpu") != "web-gpu-x" || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Other" {
		t.Fatalf("status after recording on a stale copy: %+v", got.Status)
	}
}

func TestQuotaRefusalWaitsWithEvent(t *testing.T) {
	e := newEnv(t)
	e.createTemplate("gpu-tmpl")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "claims", Namespace: e.ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/resourceclaims.resource.k8s.io": resource.MustParse("1")}}}
	if _, err := e.c.ResourceQuotas(e.ns).Create(e.ctx, quota); err != nil {
		t.Fatalf("create quota: %v", err)
	}
	ctrl, _ := e.startController()
	e.createPod(makePod("first").template("gpu", "gpu-tmpl").obj())
	e.eventually("the first claim is recorded", func() bool { return e.recordedClaim("first", "gpu") != "" })
	e.createPod(makePod("second").template("gpu", "gpu-tmpl").obj())
	e.eventually("the second pod gets a quota warning", func() bool {
		l, err := e.c.Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list events: %v", err)
		}
		for _, ev := range l.Items {
			if ev.InvolvedObject.Name == "second" && ev.Reason == ReasonFailedCreate && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Message, "exceeded quota") {
				return true
			}
		}
		return false
	})
	if got := e.recordedClaim("second", "gpu"); got != "" || len(e.claims()) != 1 {
		t.Fatalf("over quota, yet claim %q recorded / %d claims", got, len(e.claims()))
	}
	// The GC does not run here: delete the first pod and its claim.
	first := e.recordedClaim("first", "gpu")
	e.deletePod("first", nil)
	if err := e.c.ResourceClaims(e.ns).Delete(e.ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	e.eventually("the second claim is created once quota frees", func() bool { return e.recordedClaim("second", "gpu") != "" })
	if created, failed := counter(t, ctrl, "resource_controller_create_total"), counter(t, ctrl, "resource_controller_create_failures_total"); failed < 1 || created < failed+2 {
		t.Fatalf("metrics: %v creates, %v failures; want at least 2 successes and 1 failure", created, failed)
	}
}

// boundClaim creates a node, a claim and a pod using it, and binds the
// pod with a structured allocation of the claim.
func (e *env) boundClaim(claim *resourcev1alpha2.ResourceClaim, podName string) *corev1.Pod {
	e.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + podName}}
	if _, err := e.c.Nodes().Create(e.ctx, node); err != nil {
		e.t.Fatalf("create node: %v", err)
	}
	claim.Namespace = e.ns
	if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, claim); err != nil {
		e.t.Fatalf("create claim: %v", err)
	}
	pod := e.createPod(makePod(podName).claim("gpu", claim.Name).obj())
	e.bind(pod, node.Name, claim.Name)
	if c := e.claim(claim.Name); c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 {
		e.t.Fatalf("binding did not allocate and reserve: %+v", c.Status)
	}
	return e.pod(podName)
}

func (e *env) released(name string) func() bool {
	return func() bool {
		c := e.claim(name)
		return len(c.Status.ReservedFor) == 0 && c.Status.Allocation == nil && c.Status.DriverName == "" && len(c.Finalizers) == 0
	}
}

// TestReleaseClaimOfDeletedPod: a bound claim loses its reservation when
// its pod is gone, then its allocation and finalizer.
func TestReleaseClaimOfDeletedPod(t *testing.T) {
	e := newEnv(t)
	e.boundClaim(makeClaim("c1").obj(), "user")
	e.startController()
	e.consistently("the reservation of a running pod stays", 500*time.Millisecond, func() bool {
		return len(e.claim("c1").Status.ReservedFor) == 1
	})
	zero := int64(0)
	e.deletePod("user", nil)
	e.deletePod("user", &zero)
	e.eventually("the claim is released", e.released("c1"))
	// Unallocated and without finalizers, a deleted claim goes at once.
	if err := e.c.ResourceClaims(e.ns).Delete(e.ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	e.eventually("the claim is gone", func() bool { return e.claim("c1") == nil })
}

// TestReleaseClaimOfUnpreparedPod: a terminal pod keeps its reservation
// until the node agent reports its claims unprepared.
func TestReleaseClaimOfUnpreparedPod(t *testing.T) {
	e := newEnv(t)
	pod := e.boundClaim(makeClaim("c1").obj(), "job")
	e.startController()
	pod.Status.Phase = corev1.PodSucceeded
	pod = e.updatePodStatus(pod)
	e.consistently("a terminal pod's reservation stays until unprepared", 500*time.Millisecond, func() bool {
		return len(e.claim("c1").Status.ReservedFor) == 1
	})
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResourceClaimsUnprepared, Status: corev1.ConditionTrue})
	e.updatePodStatus(pod)
	e.eventually("the claim is released", e.released("c1"))
}

// TestImmediateClaimStaysAllocated: without consumers an Immediate claim
// keeps its allocation until it is deleted.
func TestImmediateClaimStaysAllocated(t *testing.T) {
	e := newEnv(t)
	e.boundClaim(makeClaim("c1").immediate().obj(), "user")
	e.startController()
	zero := int64(0)
	e.deletePod("user", nil)
	e.deletePod("user", &zero)
	e.eventually("the reservation is dropped", func() bool { return len(e.claim("c1").Status.ReservedFor) == 0 })
	e.consistently("the allocation stays", 500*time.Millisecond, func() bool {
		c := e.claim("c1")
		return c.Status.Allocation != nil && len(c.Finalizers) == 1
	})
	if err := e.c.ResourceClaims(e.ns).Delete(e.ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	e.eventually("the deleted claim is deallocated and goes", func() bool { return e.claim("c1") == nil })
}

func (e *env) updatePodStatus(p *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	out, err := e.c.Pods(e.ns).UpdateStatus(e.ctx, p)
	if err != nil {
		e.t.Fatalf("update status of pod %s: %v", p.Name, err)
	}
	return out
}

// bind allocates the claim on the node for the pod, as the scheduler does.
func (e *env) bind(pod *corev1.Pod, node, claim string) {
	e.t.Helper()
	e.bindAvailable(pod, node, claim, node, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}})
}

// bindAvailable binds with an allocation available on the nodes sel
// selects, its handle naming handleNode ("" for none).
func (e *env) bindAvailable(pod *corev1.Pod, node, claim, handleNode string, sel *corev1.NodeSelector) {
	e.t.Helper()
	const driver = "gpu.example.com"
	alloc := &resourcev1alpha2.AllocationResult{
		ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: driver, StructuredData: &resourcev1alpha2.StructuredResourceHandle{
			NodeName:      handleNode,
			Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{{ID: "gpu-0"}}},
		}}},
		AvailableOnNodes: sel,
	}
	raw, err := json.Marshal(alloc)
	if err != nil {
		e.t.Fatal(err)
	}
	b := &corev1.Binding{
		Target:           corev1.ObjectReference{Kind: "Node", Name: node},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: claim, DriverName: driver, Allocation: &runtime.RawExtension{Raw: raw}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: node, DriverName: driver, Revision: pod.ResourceVersion}},
	}
	b.APIVersion, b.Kind = "v1", "Binding"
	if _, err := e.c.Bind(e.ctx, e.ns, pod.Name, b); err != nil {
		e.t.Fatalf("bind pod %s: %v", pod.Name, err)
	}
}

// counter reads a counter from the controller's registry.
func counter(t *testing.T, c *Controller, name string) float64 {
	t.Helper()
	families, err := c.Registry().Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestCacheBehindOwnWrite: a cached claim older than the controller's own
// last write of it is not synced (that would only conflict); once the
// cache shows the write, it is, and the memory of the write is dropped.
func TestCacheBehindOwnWrite(t *testing.T) {
	c := &Controller{written: map[types.UID]uint64{}}
	at := func(rv string) *resourcev1alpha2.ResourceClaim {
		return &resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: rv}}
	}
	if c.cacheBehind(at("5")) {
		t.Fatal("behind without any write")
	}
	c.wrote(at("10"))
	if !c.cacheBehind(at("9")) {
		t.Fatal("a copy older than the controller's write is not behind")
	}
	if c.cacheBehind(at("10")) || len(c.written) != 0 {
		t.Fatalf("the copy of the write itself is behind, or the write is still remembered: %v", c.written)
	}
	if c.cacheBehind(at("9")) {
		t.Fatal("behind after the cache caught up")
	}
}
