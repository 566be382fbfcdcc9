package scheduler

import (
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
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
