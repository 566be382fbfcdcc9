package resourceclaim

import (
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

const driverFinalizer = "fabric.example.com/deletion-protection"

// cpClass creates a class allocated by the controller fabric.example.com
// and returns its name.
func (e *env) cpClass() string {
	e.t.Helper()
	cls := &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-fabric"},
		DriverName: "fabric.example.com", ControllerName: "fabric.example.com"}
	if _, err := e.c.ResourceClasses().Create(e.ctx, cls); err != nil {
		e.t.Fatalf("create class: %v", err)
	}
	e.t.Cleanup(func() { _ = e.c.ResourceClasses().Delete(e.ctx, cls.Name, metav1.DeleteOptions{}) })
	return cls.Name
}

// driverAllocate creates a claim of the class and allocates it as the
// fabric driver does (its finalizer, an opaque handle), reserved for pod
// when given.
func (e *env) driverAllocate(b *claimBuilder, class string, pod *corev1.Pod) {
	e.t.Helper()
	c := b.obj()
	c.Namespace, c.Spec.ResourceClassName = e.ns, class
	c.Finalizers = []string{driverFinalizer}
	c, err := e.c.ResourceClaims(e.ns).Create(e.ctx, c)
	if err != nil {
		e.t.Fatalf("create claim: %v", err)
	}
	c.Status.DriverName, c.Status.ControllerName = "fabric.example.com", "fabric.example.com"
	c.Status.Allocation = &resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: "fabric.example.com", Data: "port-1"}}}
	if pod != nil {
		c.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	}
	if _, err := e.c.ResourceClaims(e.ns).UpdateStatus(e.ctx, c); err != nil {
		e.t.Fatalf("allocate claim: %v", err)
	}
}

// When the last consumer of a WaitForFirstConsumer control-plane claim
// is gone, the controller drops the reservation and asks the driver to
// deallocate in the same write; it never clears the allocation or the
// driver's finalizer itself, so deleting the claim waits for the driver.
// An Immediate control-plane claim stays allocated.
func TestUnusedControlPlaneClaimGetsDeallocationRequested(t *testing.T) {
	e := newEnv(t)
	class := e.cpClass()
	user := e.createPod(makePod("user").claim("net", "c1").claim("net2", "c2").obj())
	e.driverAllocate(makeClaim("c1"), class, user)
	e.driverAllocate(makeClaim("c2").immediate(), class, user)
	e.startController()
	e.consistently("the reservation of an existing pod stays", 500*time.Millisecond, func() bool {
		return len(e.claim("c1").Status.ReservedFor) == 1 && !e.claim("c1").Status.DeallocationRequested
	})
	zero := int64(0)
	e.deletePod("user", &zero)
	e.eventually("c1: reservation dropped and deallocation requested", func() bool {
		c := e.claim("c1")
		return len(c.Status.ReservedFor) == 0 && c.Status.DeallocationRequested
	})
	e.eventually("c2: reservation dropped", func() bool { return len(e.claim("c2").Status.ReservedFor) == 0 })
	e.consistently("the driver's allocation and finalizer stay; the Immediate claim is not deallocated", 500*time.Millisecond, func() bool {
		c1, c2 := e.claim("c1"), e.claim("c2")
		return c1.Status.Allocation != nil && slices.Equal(c1.Finalizers, []string{driverFinalizer}) &&
			c2.Status.Allocation != nil && !c2.Status.DeallocationRequested
	})
	if err := e.c.ResourceClaims(e.ns).Delete(e.ctx, "c2", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	e.consistently("a deleted claim waits for its driver", 500*time.Millisecond, func() bool {
		c := e.claim("c2")
		return c != nil && c.DeletionTimestamp != nil && slices.Contains(c.Finalizers, driverFinalizer)
	})
	// The driver deallocates and drops its finalizer: the claim goes.
	c := e.claim("c2")
	c.Status.Allocation, c.Status.DriverName, c.Status.ControllerName = nil, "", ""
	if c, err := e.c.ResourceClaims(e.ns).UpdateStatus(e.ctx, c); err != nil {
		t.Fatalf("deallocate: %v", err)
	} else {
		c.Finalizers = nil
		if _, err := e.c.ResourceClaims(e.ns).Update(e.ctx, c); err != nil {
			t.Fatalf("remove finalizer: %v", err)
		}
	}
	e.eventually("the claim is gone", func() bool { return e.claim("c2") == nil })
}

// A pod given a node by hand whose control-plane claim is not allocated
// gets a PodSchedulingContext, owned by it, with only selectedNode; a
// hand-placed pod with a structured claim gets none (the scheduler
// allocates structured claims).
func TestHandPlacedPodGetsSchedulingContext(t *testing.T) {
	e := newEnv(t)
	class := e.cpClass()
	for _, c := range []*resourcev1alpha2.ResourceClaim{makeClaim("net").obj(), makeClaim("gpu").obj()} {
		c.Namespace = e.ns
		if c.Name == "net" {
			c.Spec.ResourceClassName = class
		}
		if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, c); err != nil {
			t.Fatalf("create claim: %v", err)
		}
	}
	e.startController()
	p := makePod("placed").claim("net", "net").obj()
	p.Spec.NodeName = "node-a"
	placed := e.createPod(p)
	s := makePod("structured").claim("gpu", "gpu").obj()
	s.Spec.NodeName = "node-a"
	e.createPod(s)
	var sc *resourcev1alpha2.PodSchedulingContext
	e.eventually("the context of the placed pod", func() bool {
		var err error
		sc, err = e.c.PodSchedulingContexts(e.ns).Get(e.ctx, "placed")
		return err == nil
	})
	if sc.Spec.SelectedNode != "node-a" || len(sc.Spec.PotentialNodes) != 0 {
		t.Errorf("spec %+v, want only selectedNode node-a", sc.Spec)
	}
	if len(sc.OwnerReferences) != 1 || sc.OwnerReferences[0].UID != placed.UID {
		t.Errorf("owners %+v, want the pod", sc.OwnerReferences)
	}
	e.consistently("no context for the pod with a structured claim", 500*time.Millisecond, func() bool {
		_, err := e.c.PodSchedulingContexts(e.ns).Get(e.ctx, "structured")
		return apierrors.IsNotFound(err)
	})
	// A context whose selectedNode was changed is put back.
	sc.Spec.SelectedNode, sc.Spec.PotentialNodes = "node-b", []string{"node-b"}
	if _, err := e.c.PodSchedulingContexts(e.ns).Update(e.ctx, sc); err != nil {
		t.Fatalf("update context: %v", err)
	}
	e.eventually("selectedNode back to the pod's node", func() bool {
		sc, err := e.c.PodSchedulingContexts(e.ns).Get(e.ctx, "placed")
		return err == nil && sc.Spec.SelectedNode == "node-a" && len(sc.Spec.PotentialNodes) == 0
	})
}
