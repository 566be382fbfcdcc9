package scheduler

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/queue"
)

// A pending pod whose template claim is not recorded yet is gated: no
// attempt, no PodScheduled=False patch, no FailedScheduling event. The
// claim controller's status update lets it in, and it is bound.
func TestPendingPodGatedUntilTemplateClaimRecorded(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"))
	f.addPod(makePod("p").ClaimTemplate("gpu", "t").Obj())
	if got := f.s.queue.Where("default/p"); got != queue.Gated {
		t.Fatalf("pod in %q, want gated", got)
	}
	time.Sleep(50 * time.Millisecond) // a loop that tried the pod would have written by now
	if patches, events := f.counts(); patches+events != 0 {
		t.Fatalf("%d status patches and %d events for a gated pod, want none", patches, events)
	}
	f.dra.add(t, f.s, newClaim("p-gpu", "small"))
	name := "p-gpu"
	f.updatePodStatus("p", func(st *corev1.PodStatus) {
		st.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	})
	if node := f.waitNode(t, "p"); node != "n" {
		t.Fatalf("bound to %q, want n", node)
	}
	if patches, _ := f.counts(); patches != 0 {
		t.Fatalf("%d status patches, want none: the pod never waited in a cycle", patches)
	}
}

// A pod whose status records its template claim before the scheduler's
// claim informer has the claim waits for it quietly on its first attempt:
// no PodScheduled=False patch, no FailedScheduling event; the claim's
// event moves it, and it is bound.
func TestRecordedClaimNotSeenYetWaitsQuietly(t *testing.T) {
	f := recordedBeforeSeen(t, Config{})
	deadline := time.Now().Add(10 * time.Second)
	for f.s.queue.Where("default/p") != queue.Unschedulable {
		if time.Now().After(deadline) {
			t.Fatalf("pod in %q, want parked after its attempt", f.s.queue.Where("default/p"))
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the attempt's writes, had there been any
	if patches, events := f.counts(); patches+events != 0 {
		t.Fatalf("%d status patches and %d events while the claim's event is on its way, want none", patches, events)
	}
	f.dra.add(t, f.s, newClaim("p-gpu", "small"))
	if node := f.waitNode(t, "p"); node != "n" {
		t.Fatalf("bound to %q, want n", node)
	}
	if patches, _ := f.counts(); patches != 0 {
		t.Fatalf("%d status patches, want none", patches)
	}
}

// Should the recorded claim never show up, the next attempt (here after
// the unschedulable timeout) reports the wait.
func TestRecordedClaimNeverSeenIsReported(t *testing.T) {
	f := recordedBeforeSeen(t, Config{UnschedulableTimeout: 100 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if patches, events := f.counts(); patches > 0 && events > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wait for a claim that never shows up was never reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c := PodScheduledCondition(f.pod("p")); c == nil || !strings.Contains(c.Message, "waiting for resource claim default/p-gpu") {
		t.Fatalf("PodScheduled condition %+v, want the wait for default/p-gpu", c)
	}
}

// recordedBeforeSeen starts a scheduler with a node and the DRA objects
// but claim p-gpu, and a pod p whose status records p-gpu as the claim of
// its template entry.
func recordedBeforeSeen(t *testing.T, cfg Config) *fakeCluster {
	t.Helper()
	f := start(t, cfg, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"))
	f.addPod(makePod("p").ClaimTemplate("gpu", "t").Obj())
	name := "p-gpu"
	f.updatePodStatus("p", func(st *corev1.PodStatus) {
		st.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	})
	return f
}

// A pod need not wait for the claim controller to record its template
// claim: the claim generated for the entry (controlled by the pod,
// annotated with the entry) lets it out of the gate when the claim
// informer has it, and its binding carries the claim.
func TestGeneratedClaimUngatesPod(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"))
	pod := makePod("p").ClaimTemplate("gpu", "t").Obj()
	f.addPod(pod)
	if got := f.s.queue.Where(pod.UID); got != queue.Gated {
		t.Fatalf("pod in %q, want gated", got)
	}
	// A claim generated for another entry of the pod does not open the gate.
	yes := true
	generated := func(name, entry string) *resourceapi.ResourceClaim {
		c := newClaim(name, "small")
		c.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: entry}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID, Controller: &yes}}
		return c
	}
	f.dra.add(t, f.s, generated("p-other-xyz", "other"))
	if got := f.s.queue.Where(pod.UID); got != queue.Gated {
		t.Fatalf("pod in %q after a claim for another entry, want gated", got)
	}
	f.dra.add(t, f.s, generated("p-gpu-abcde", "gpu"))
	if node := f.waitNode(t, "p"); node != "n" {
		t.Fatalf("bound to %q, want n", node)
	}
	f.mu.Lock()
	b := f.bindings["p"]
	f.mu.Unlock()
	if b == nil || len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Name != "p-gpu-abcde" || b.ResourceClaims[0].Allocation == nil {
		t.Fatalf("binding %+v, want it to allocate p-gpu-abcde", b)
	}
	if patches, _ := f.counts(); patches != 0 {
		t.Fatalf("%d status patches, want none", patches)
	}
}
