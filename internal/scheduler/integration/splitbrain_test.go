package integration

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
)

// Two schedulers allocate from the same GPUs at once, each from its own
// view, as two replicas do for a moment when a paused leader acts after
// its lease expired. Replicas of one name see the same pods in the same
// order and mostly collide on the pod itself (the second binding of a pod
// fails); a leader waking up acts on whatever pod it had in hand, so the
// two here schedule disjoint halves of the pods and collide only on
// devices. The API server's allocation fence must keep the outcome one a
// single scheduler could have made: each GPU given to one claim, each
// claim reserved for one pod, as many pods bound as there are GPUs. (With
// the fence's check disabled it failed in two of three runs.)
func TestTwoSchedulersNeverShareADevice(t *testing.T) {
	var second scheduler.Config
	e := draSetupWith(t, func(c *scheduler.Config) { second = *c })
	second.SchedulerName = e.name + "-b"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.Run(ctx, second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second scheduler: %v", err)
		}
	})
	const pods = 12 // for 4 GPUs
	for i := range pods {
		e.createClaim(fmt.Sprintf("c%d", i))
	}
	for i := range pods {
		b := claimPod(fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
		if i%2 == 1 {
			b = b.SchedulerName(second.SchedulerName)
		}
		e.createPod(b)
	}
	e.eventually("four pods bound and the rest unschedulable", func() bool {
		bound, pending := 0, 0
		for i := range pods {
			p := e.getPod(fmt.Sprintf("p%d", i))
			if p.Spec.NodeName != "" {
				bound++
			} else if c := scheduler.PodScheduledCondition(p); c != nil && c.Status == corev1.ConditionFalse {
				pending++
			}
		}
		return bound == 4 && pending == pods-4
	})
	claims, err := e.c.ResourceClaims(e.ns).List(callCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byDevice := map[string]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			if len(c.Status.ReservedFor) > 0 {
				t.Errorf("claim %s unallocated but reserved for %v", c.Name, c.Status.ReservedFor)
			}
			continue
		}
		if len(c.Status.ReservedFor) != 1 {
			t.Errorf("claim %s reserved for %v, want one pod", c.Name, c.Status.ReservedFor)
		}
		for _, h := range c.Status.Allocation.ResourceHandles {
			for _, in := range h.StructuredData.Partitionable.Instances {
				if other, dup := byDevice[in.ID]; dup {
					t.Errorf("GPU %s allocated to claims %s and %s", in.ID, other, c.Name)
				}
				byDevice[in.ID] = c.Name
			}
		}
		// The pod the claim is reserved for is bound, and is the claim's.
		pod := e.getPod("p" + c.Name[1:])
		if pod.Spec.NodeName == "" || len(c.Status.ReservedFor) == 1 && c.Status.ReservedFor[0].UID != pod.UID {
			t.Errorf("claim %s reserved for %v, its pod %s on %q", c.Name, c.Status.ReservedFor, pod.UID, pod.Spec.NodeName)
		}
	}
	if len(byDevice) != 4 {
		t.Errorf("allocated GPUs %v, want all 4", byDevice)
	}
}
