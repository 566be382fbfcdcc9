package fabricdriver

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/driver/controller"
)

const (
	immediate = resourcev1alpha2.AllocationModeImmediate
	wffc      = resourcev1alpha2.AllocationModeWaitForFirstConsumer
)

// threePools: two racks of model fpga (capacity 1 and 3) and a zone of
// model gpu (capacity 5).
const threePools = `
pools:
- {name: small, model: fpga, capacity: 1, nodeSelector: {fabric.example.com/rack: r1}}
- {name: big, model: fpga, capacity: 3, nodeSelector: {fabric.example.com/rack: r2}}
- {name: zone, model: gpu, capacity: 5, nodeSelector: {fabric.example.com/zone: a}}
`

func selectorOf(key, value string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}
}

func TestImmediateAllocation(t *testing.T) {
	e := newEnv(t)
	e.startController(threePools, nil)
	e.params("two-fpgas", map[string]any{"count": 2, "model": "fpga"})
	e.claim("two-fpgas", "two-fpgas", immediate)
	e.claim("plain", "", immediate)
	missing := e.claim("missing", "no-such-params", immediate)

	c, h := e.allocated("two-fpgas")
	if want := (Handle{Pool: "big", Model: "fpga", Units: []string{"big-0", "big-1"}}); !reflect.DeepEqual(h, want) {
		t.Errorf("two-fpgas: handle %+v, want %+v", h, want)
	}
	if got, want := c.Status.Allocation.AvailableOnNodes, selectorOf("fabric.example.com/rack", "r2"); !reflect.DeepEqual(got, want) {
		t.Errorf("two-fpgas: availableOnNodes %+v, want the pool's rack r2", got)
	}
	// Without parameters: one unit of any model, from the pool with the
	// most free units.
	_, h = e.allocated("plain")
	if want := (Handle{Pool: "zone", Model: "gpu", Units: []string{"zone-0"}}); !reflect.DeepEqual(h, want) {
		t.Errorf("plain: handle %+v, want %+v", h, want)
	}
	eventually(t, "a ParametersUnavailable event on the claim with missing parameters", func() bool {
		return e.hasEvent(missing.UID, controller.ReasonParametersUnavailable)
	})
}

// TestUnsuitableNodesFromLabels: nodes reach pools through their labels;
// a pod's claims are placed together.
func TestUnsuitableNodesFromLabels(t *testing.T) {
	e := newEnv(t)
	n1 := e.node("n1", map[string]string{"fabric.example.com/rack": "r1"})
	n2 := e.node("n2", map[string]string{"fabric.example.com/rack": "r2"})
	n3 := e.node("n3", nil)
	e.startController(threePools, nil)
	e.params("two-fpgas", map[string]any{"count": 2, "model": "fpga"})

	e.claim("a", "two-fpgas", wffc)
	pod := e.podWithContext("pod", resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{n1, n2, n3, "no-such-node"}}, "a")
	eventually(t, "unsuitable n1 (too small), n3 (no pool) and the unknown node", func() bool {
		nodes, _ := e.unsuitable("pod", "a")
		return slices.Equal(nodes, []string{n1, n3, "no-such-node"})
	})
	e.selectNode("pod", n2)
	c, h := e.allocated("a")
	if h.Pool != "big" || len(h.Units) != 2 {
		t.Errorf("handle %+v, want two units of big", h)
	}
	if r := c.Status.ReservedFor; len(r) != 1 || r[0].UID != pod.UID {
		t.Errorf("reservedFor = %+v, want the pod", r)
	}
	if got := c.Status.Allocation.AvailableOnNodes; !reflect.DeepEqual(got, selectorOf("fabric.example.com/rack", "r2")) {
		t.Errorf("availableOnNodes %+v, want rack r2", got)
	}

	// One unit is left in big (n2) and one in small (n1): two claims of one
	// unit each do not fit together on either node; one claim does.
	e.claim("b", "", wffc)
	e.claim("c", "", wffc)
	e.podWithContext("two", resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{n1, n2}}, "b", "c")
	e.claim("d", "", wffc)
	e.podWithContext("one", resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{n1, n2}}, "d")
	eventually(t, "both nodes unsuitable for b and c together", func() bool {
		b, _ := e.unsuitable("two", "b")
		c, _ := e.unsuitable("two", "c")
		return slices.Equal(b, []string{n1, n2}) && slices.Equal(c, []string{n1, n2})
	})
	eventually(t, "both nodes suitable for d", func() bool {
		d, ok := e.unsuitable("one", "d")
		return ok && len(d) == 0
	})
}

// TestRaceForLastUnit: two pods select the node of a pool with one free
// unit at once; one claim gets it, the other's node is marked unsuitable.
func TestRaceForLastUnit(t *testing.T) {
	e := newEnv(t)
	n1 := e.node("n1", map[string]string{"fabric.example.com/rack": "r1"})
	e.startController(`
pools:
- {name: last, model: fpga, capacity: 1, nodeSelector: {fabric.example.com/rack: r1}}
`, nil)
	claims := []*resourcev1alpha2.ResourceClaim{e.claim("a", "", wffc), e.claim("b", "", wffc)}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() {
			e.podWithContext("pod-"+c.Name, resourcev1alpha2.PodSchedulingContextSpec{SelectedNode: n1}, c.Name)
		})
	}
	wg.Wait()
	var winner, loser *resourcev1alpha2.ResourceClaim
	eventually(t, "one claim allocated, the other refused", func() bool {
		winner, loser = nil, nil
		for _, c := range claims {
			got := e.getClaim(c.Name)
			if got.Status.Allocation != nil {
				winner = got
				continue
			}
			if nodes, _ := e.unsuitable("pod-"+c.Name, c.Name); slices.Equal(nodes, []string{n1}) {
				loser = got
			}
		}
		return winner != nil && loser != nil
	})
	// The loser stays unallocated while the winner holds the unit.
	time.Sleep(500 * time.Millisecond)
	if got := e.getClaim(loser.Name); got.Status.Allocation != nil {
		t.Fatalf("both claims allocated; %s got %+v", loser.Name, got.Status.Allocation)
	}
	if !e.hasEvent(loser.UID, controller.ReasonAllocationFailed) {
		t.Errorf("no AllocationFailed event on %s", loser.Name)
	}
}

// TestOptionalFallback: an optional claim avoids nodes where it would get
// nothing while units are free, and falls back to nothing (with
// availableOnNodes unset) when none are.
func TestOptionalFallback(t *testing.T) {
	e := newEnv(t)
	n1 := e.node("n1", map[string]string{"fabric.example.com/rack": "r1"})
	n2 := e.node("n2", nil)
	e.startController(`
pools:
- {name: only, model: fpga, capacity: 1, nodeSelector: {fabric.example.com/rack: r1}}
`, nil)
	e.params("maybe", map[string]any{"optional": true})

	e.claim("first", "maybe", wffc)
	e.podWithContext("first", resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{n1, n2}}, "first")
	eventually(t, "n2 unsuitable while a unit is free", func() bool {
		nodes, _ := e.unsuitable("first", "first")
		return slices.Equal(nodes, []string{n2})
	})
	e.selectNode("first", n1)
	if _, h := e.allocated("first"); h.Pool != "only" || !slices.Equal(h.Units, []string{"only-0"}) {
		t.Errorf("first: handle %+v, want only-0", h)
	}

	e.claim("second", "maybe", wffc)
	e.podWithContext("second", resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{n1, n2}}, "second")
	eventually(t, "every node suitable once nothing is free", func() bool {
		nodes, ok := e.unsuitable("second", "second")
		return ok && len(nodes) == 0
	})
	e.selectNode("second", n2)
	c, h := e.allocated("second")
	if !reflect.DeepEqual(h, Handle{Fallback: true}) || c.Status.Allocation.AvailableOnNodes != nil || len(c.Status.ReservedFor) != 1 {
		t.Errorf("second: handle %+v, availableOnNodes %v, reservedFor %v; want a fallback usable anywhere, reserved",
			h, c.Status.Allocation.AvailableOnNodes, c.Status.ReservedFor)
	}
}

// killAfterAllocate is a controller.Driver that cancels the controller
// right after its first successful Allocate: the SDK then fails to write
// the allocation, as if the process had died between the two.
type killAfterAllocate struct {
	controller.Driver
	killed chan struct{}

	mu     sync.Mutex
	cancel func() // nil once used
}

func (k *killAfterAllocate) setCancel(cancel func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancel = cancel
}

func (k *killAfterAllocate) Allocate(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, claimParams any,
	class *resourcev1alpha2.ResourceClass, classParams any, node string) (*resourcev1alpha2.AllocationResult, error) {
	a, err := k.Driver.Allocate(ctx, claim, claimParams, class, classParams, node)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil && k.cancel != nil {
		k.cancel()
		k.cancel = nil
		close(k.killed)
	}
	return a, err
}

// TestRestartDoesNotDoubleCount: the units a dead controller handed out
// but never recorded are free for the next one, so the claim gets them
// once and the pool's capacity is all there for the others.
func TestRestartDoesNotDoubleCount(t *testing.T) {
	e := newEnv(t)
	const pools = `
pools:
- {name: pair, model: fpga, capacity: 2, nodeSelector: {fabric.example.com/rack: r1}}
`
	kill := &killAfterAllocate{killed: make(chan struct{})}
	r := e.startController(pools, func(d controller.Driver) controller.Driver { kill.Driver = d; return kill })
	kill.setCancel(r.cancel)
	e.claim("a", "", immediate)
	select {
	case <-kill.killed:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for the allocation of a")
	}
	r.stop(t)
	if c := e.getClaim("a"); c.Status.Allocation != nil || !slices.Contains(c.Finalizers, controller.Finalizer(DriverName)) {
		t.Fatalf("killed mid-allocation: allocation %v, finalizers %v; want none and the driver's", c.Status.Allocation, c.Finalizers)
	}

	e.startController(pools, nil)
	if _, h := e.allocated("a"); !slices.Equal(h.Units, []string{"pair-0"}) {
		t.Errorf("a: units %v, want pair-0", h.Units)
	}
	e.claim("b", "", immediate)
	if _, h := e.allocated("b"); !slices.Equal(h.Units, []string{"pair-1"}) {
		t.Errorf("b: units %v, want pair-1 (a counted once)", h.Units)
	}
	c := e.claim("c", "", immediate)
	eventually(t, "c refused: the pool is full", func() bool { return e.hasEvent(c.UID, controller.ReasonAllocationFailed) })
}
