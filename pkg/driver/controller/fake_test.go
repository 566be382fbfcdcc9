package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// errNoCapacity is the fake vendor's answer when every unit is taken.
var errNoCapacity = errors.New("no free unit")

// fakeVendor is a vendor with capacity units ("unit-0", ...) reachable
// from every node except those in unreachable. Its bookkeeping is keyed
// by claim UID, so Allocate is idempotent, and it outlives controllers,
// like a vendor's external service.
type fakeVendor struct {
	mu          sync.Mutex
	capacity    int
	unreachable map[string]bool
	units       map[types.UID]string // allocated unit per claim
	allocates   map[types.UID]int    // Allocate calls per claim
	deallocates map[types.UID]int    // Deallocate calls per claim
	nodes       map[types.UID]string // last selectedNode per claim
	checked     [][]string           // node lists of UnsuitableNodes calls
	// afterAllocate runs after Allocate reserved a unit, before it
	// returns; a test cancels the controller here to kill it between the
	// vendor's bookkeeping and the status write.
	afterAllocate func(claim *resourcev1alpha2.ResourceClaim)
}

var _ Driver = &fakeVendor{}

func newFakeVendor(capacity int, unreachable ...string) *fakeVendor {
	v := &fakeVendor{capacity: capacity, unreachable: map[string]bool{},
		units: map[types.UID]string{}, allocates: map[types.UID]int{}, deallocates: map[types.UID]int{}, nodes: map[types.UID]string{}}
	for _, n := range unreachable {
		v.unreachable[n] = true
	}
	return v
}

// GetClassParameters returns the class's name, to check it reaches
// Allocate.
func (v *fakeVendor) GetClassParameters(_ context.Context, class *resourcev1alpha2.ResourceClass) (any, error) {
	return "class:" + class.Name, nil
}

func (v *fakeVendor) GetClaimParameters(_ context.Context, claim *resourcev1alpha2.ResourceClaim, _ *resourcev1alpha2.ResourceClass, classParams any) (any, error) {
	return fmt.Sprintf("claim:%s/%v", claim.Name, classParams), nil
}

func (v *fakeVendor) Allocate(_ context.Context, claim *resourcev1alpha2.ResourceClaim, claimParams any,
	class *resourcev1alpha2.ResourceClass, classParams any, node string) (*resourcev1alpha2.AllocationResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.allocates[claim.UID]++
	v.nodes[claim.UID] = node
	if want := fmt.Sprintf("claim:%s/class:%s", claim.Name, class.Name); claimParams != want || classParams != "class:"+class.Name {
		return nil, fmt.Errorf("parameters %v and %v, want %s", classParams, claimParams, want)
	}
	if v.unreachable[node] {
		return nil, fmt.Errorf("node %s: unreachable", node)
	}
	unit, ok := v.units[claim.UID]
	if !ok {
		if unit = v.freeUnit(); unit == "" {
			return nil, errNoCapacity
		}
		v.units[claim.UID] = unit
	}
	if v.afterAllocate != nil {
		v.afterAllocate(claim)
	}
	a := &resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{Data: `{"unit":"` + unit + `"}`}}}
	if node != "" {
		a.AvailableOnNodes = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
	}
	return a, nil
}

func (v *fakeVendor) freeUnit() string {
	for i := range v.capacity {
		u := fmt.Sprintf("unit-%d", i)
		if !slices.Contains(v.usedUnits(), u) {
			return u
		}
	}
	return ""
}

func (v *fakeVendor) usedUnits() []string {
	var out []string
	for _, u := range v.units {
		out = append(out, u)
	}
	return out
}

func (v *fakeVendor) Deallocate(_ context.Context, claim *resourcev1alpha2.ResourceClaim) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.deallocates[claim.UID]++
	delete(v.units, claim.UID)
	return nil
}

// UnsuitableNodes: unreachable nodes, and every node when the free units
// do not cover all of the pod's pending claims.
func (v *fakeVendor) UnsuitableNodes(_ context.Context, _ *corev1.Pod, claims []*ClaimAllocation, nodes []string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.checked = append(v.checked, slices.Clone(nodes))
	held := 0
	for _, ca := range claims {
		if _, ok := v.units[ca.Claim.UID]; ok {
			held++
		}
	}
	enough := v.capacity-len(v.units)+held >= len(claims)
	for _, ca := range claims {
		ca.UnsuitableNodes = nil
		for _, n := range nodes {
			if v.unreachable[n] || !enough {
				ca.UnsuitableNodes = append(ca.UnsuitableNodes, n)
			}
		}
	}
	return nil
}

// killAfterAllocate makes the next Allocate call kill before it returns:
// it calls kill (a controller's cancel) and closes the returned channel.
func (v *fakeVendor) killAfterAllocate(kill context.CancelFunc) <-chan struct{} {
	killed := make(chan struct{})
	v.mu.Lock()
	defer v.mu.Unlock()
	v.afterAllocate = func(*resourcev1alpha2.ResourceClaim) {
		v.afterAllocate = nil
		kill()
		close(killed)
	}
	return killed
}

// setUnreachable changes which nodes the vendor cannot serve.
func (v *fakeVendor) setUnreachable(nodes ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.unreachable = map[string]bool{}
	for _, n := range nodes {
		v.unreachable[n] = true
	}
}

// state returns a snapshot: units by claim and the call counts of uid.
func (v *fakeVendor) state(uid types.UID) (units map[types.UID]string, allocates, deallocates int, node string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	units = make(map[types.UID]string, len(v.units))
	for k, u := range v.units {
		units[k] = u
	}
	return units, v.allocates[uid], v.deallocates[uid], v.nodes[uid]
}

// lastChecked returns the node list of the last UnsuitableNodes call.
func (v *fakeVendor) lastChecked() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.checked) == 0 {
		return nil
	}
	return v.checked[len(v.checked)-1]
}
