package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/schedtest"
)

const draDriver = "gpu.example.com"

// draSetup creates a node with four 8Gi GPUs, a class and claim
// parameters asking for one GPU; names are the test's.
func draSetup(t *testing.T) *env {
	t.Helper()
	return draSetupWith(t, nil)
}

// draSetupWith is draSetup with the scheduler's Config changed by mutate.
func draSetupWith(t *testing.T, mutate func(*scheduler.Config)) *env {
	t.Helper()
	e := newEnv(t, mutate, schedtest.MakeNode("gpus").Alloc("cpu", "8").Alloc("pods", "20").Obj())
	ctx := callCtx(t)
	var leaves []resourceapi.ResourceInstance
	for i := range 4 {
		leaves = append(leaves, resourceapi.ResourceInstance{Name: fmt.Sprintf("gpu-%d", i), CommonAttributesRefs: []string{"small"}})
	}
	slice := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-gpus"}}
	slice.Spec.NodeName, slice.Spec.DriverName = e.node("gpus"), draDriver
	slice.Spec.Partitionable = &resourceapi.PartitionableResources{
		CommonAttributes:  []resourceapi.AttributeGroup{{Name: "small", Attributes: []resourceapi.Attribute{{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: ptrTo(resource.MustParse("8Gi"))}}}}},
		ResourceInstances: leaves,
	}
	must(t, "create slice", func() error { _, err := e.c.NodeResourceSlices().Create(ctx, slice); return err })
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name}, DriverName: draDriver}
	must(t, "create class", func() error { _, err := e.c.ResourceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.NodeResourceSlices().Delete(c, slice.Name, metav1.DeleteOptions{})
		_ = e.c.ResourceClasses().Delete(c, class.Name, metav1.DeleteOptions{})
	})
	params := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: e.ns},
		Requests: []resourceapi.ResourceRequest{{DriverName: draDriver, ResourceRequestModel: resourceapi.ResourceRequestModel{
			Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
				{Name: "gpu", Selector: `quantities["memory"] >= "8Gi"`}}},
		}}}}
	must(t, "create parameters", func() error { _, err := e.c.ResourceClaimParameters(e.ns).Create(ctx, params); return err })
	return e
}

func must(t *testing.T, what string, fn func() error) {
	t.Helper()
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (e *env) createClaim(name string) {
	e.t.Helper()
	e.createClaimWith(name, "one-gpu")
}

// createClaimWith creates a claim of the test's class with the named
// ResourceClaimParameters.
func (e *env) createClaimWith(name, params string) {
	e.t.Helper()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: resourceapi.ResourceClaimSpec{
		ResourceClassName: e.name,
		ParametersRef:     &resourceapi.ResourceClaimParametersReference{APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: params},
	}}
	must(e.t, "create claim "+name, func() error { _, err := e.c.ResourceClaims(e.ns).Create(callCtx(e.t), c); return err })
}

func claimPod(name, claim string) schedtest.PodBuilder {
	b := schedtest.MakePod(name).Req("cpu", "100m")
	p := b.Obj()
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	return b
}

// Pods created in a burst are scheduled before the informers show the
// previous bindings: the in-memory reservations keep the instances
// distinct, each binding waits for the earlier ones on the node and fences
// with their revision (no 409), and the fifth pod is unschedulable with
// the allocator's reason.
func TestDRABurstGetsDistinctInstances(t *testing.T) {
	e := draSetup(t)
	for i := range 5 {
		e.createClaim(fmt.Sprintf("c%d", i))
	}
	for i := range 5 {
		e.createPod(claimPod(fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i)))
	}
	bound, pending := 0, ""
	e.eventually("four pods bound and one unschedulable", func() bool {
		bound, pending = 0, ""
		for i := range 5 {
			p := e.getPod(fmt.Sprintf("p%d", i))
			if p.Spec.NodeName != "" {
				bound++
			} else if c := scheduler.PodScheduledCondition(p); c != nil && c.Status == corev1.ConditionFalse {
				pending = c.Message
			}
		}
		return bound == 4 && pending != ""
	})
	if !strings.Contains(pending, "claim "+e.ns+"/c") {
		t.Errorf("unschedulable message %q does not name the claim", pending)
	}
	seen := map[string]string{}
	claims, err := e.c.ResourceClaims(e.ns).List(callCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		id := c.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID
		if other, dup := seen[id]; dup {
			t.Errorf("instance %s given to claims %s and %s", id, other, c.Name)
		}
		seen[id] = c.Name
	}
	if len(seen) != 4 {
		t.Errorf("allocated instances = %v, want 4", seen)
	}
	// Later bindings waited for earlier ones instead of losing the fence.
	for i := range 4 {
		for _, ev := range e.events(fmt.Sprintf("p%d", i)) {
			if strings.Contains(ev.Message, "binding rejected") {
				t.Errorf("p%d: %s", i, ev.Message)
			}
		}
	}
}

// A pod whose claim does not exist yet waits, and is scheduled by the
// claim's creation event (the safety net is an hour); explain, over one
// List, says what it waits for.
func TestDRAWaitsForClaim(t *testing.T) {
	e := draSetup(t)
	e.createPod(claimPod("late", "late"))
	msg := e.waitUnschedulable("late")
	want := "waiting for resource claim " + e.ns + "/late to be created"
	if !strings.Contains(msg, want) {
		t.Fatalf("message %q, want %q", msg, want)
	}
	snap, err := scheduler.ListSnapshot(context.Background(), e.c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := plugins.NewDefaultFramework(plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := scheduler.Explain(callCtx(t), fw, snap, e.getPod("late")); !strings.Contains(d.Message(), want) {
		t.Errorf("explain: %q, want %q", d.Message(), want)
	}
	e.createClaim("late")
	if node := e.waitBound("late"); node != "gpus" {
		t.Fatalf("bound to %s", node)
	}
}

func ptrTo[T any](v T) *T { return &v }
