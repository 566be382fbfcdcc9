package dradiff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// The upstream side: Kubernetes' own structured allocator, as the
// kube-scheduler's DRA plugin calls it.

// upstreamFeatures are the allocator features on by default in Kubernetes
// 1.37 that these cases use. With exactly these, NewAllocator picks the
// "stable" variant. distinctAttribute constraints need the incubating
// variant (stable refuses them as an unknown constraint type), which
// DRAConsumableCapacity (beta, on by default) selects; cases that use them
// run with it.
func upstreamFeatures(c *Case) structured.Features {
	if c.needsIncubating() {
		return variantFeatures("incubating")
	}
	return variantFeatures("stable")
}

// variantFeatures are feature sets that select each of upstream's three
// allocator variants: stable (the four default features), incubating
// (plus DRAConsumableCapacity and DRAFractionalCapacityRange, beta and on
// by default in 1.37) and
// experimental (plus DRAListTypeAttributes, alpha; no case has list
// attributes, so it changes nothing but the variant).
func variantFeatures(variant string) structured.Features {
	f := structured.Features{
		AdminAccess:          true,
		PrioritizedList:      true,
		PartitionableDevices: true,
		DeviceTaints:         true,
	}
	switch variant {
	case "incubating":
		f.ConsumableCapacity, f.FractionalCapacityRange = true, true
	case "experimental":
		f.ConsumableCapacity, f.FractionalCapacityRange = true, true
		f.ListTypeAttributes = true
	}
	return f
}

// otherVariants are the variants besides the one the case runs with that
// can run it (stable refuses distinctAttribute).
func otherVariants(c *Case) []string {
	if c.needsIncubating() {
		return []string{"experimental"}
	}
	return []string{"incubating", "experimental"}
}

// celCache is shared by every upstream allocator and by the checker.
var celCache = cel.NewCache(1000, cel.Features{})

type classLister []*resourcev1.DeviceClass

func (l classLister) List() ([]*resourcev1.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

type outcomeKind int

const (
	fit outcomeKind = iota
	noFit
	// failed: an error that, in the scheduler, rejects the pod for this
	// attempt (ErrFailedAllocationOnNode, or an error about the claims such
	// as "asks for all devices, but resource pool ... is currently being
	// updated").
	failed
	timeout
)

func (k outcomeKind) String() string {
	return [...]string{"fit", "no fit", "error", "timeout"}[k]
}

// fits says whether the outcome is a fit; failed counts as not fitting.
func (k outcomeKind) fits() bool { return k == fit }

type upOutcome struct {
	kind    outcomeKind
	results []resourcev1.AllocationResult
	err     error
	dur     time.Duration
}

// constraintErr reports whether err is upstream's "cannot add device ...
// because a claim constraint would not be satisfied", which it raises when
// a device of an allocation mode All request breaks a constraint given the
// devices picked so far: it stops the whole search instead of backtracking.
func constraintErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "because a claim constraint would not be satisfied")
}

// runUpstream allocates the claims on the node with upstream's allocator.
func runUpstream(c *Case, claims []*resourcev1.ResourceClaim, node *k8scorev1.Node, limit time.Duration) upOutcome {
	return runUpstreamWith(upstreamFeatures(c), c, claims, node, limit)
}

func runUpstreamWith(features structured.Features, c *Case, claims []*resourcev1.ResourceClaim, node *k8scorev1.Node, limit time.Duration) upOutcome {
	allocated := sets.New[structured.DeviceID]()
	for _, h := range c.Holes {
		allocated.Insert(structured.MakeDeviceID(h.Driver, h.Pool, h.Device))
	}
	state := structured.AllocatedState{
		AllocatedDevices:         allocated,
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	// As kube-scheduler gathers them: a result with a shareID is a shared
	// device, its consumedCapacity added to the device's aggregate.
	for i, sh := range c.Shares {
		id := structured.MakeDeviceID(sh.Driver, sh.Pool, sh.Device)
		uid := shareUID(i)
		state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &uid))
		state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, sh.Consumed))
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	a, err := structured.NewAllocator(ctx, features, state, classLister(c.Classes), c.Slices, celCache)
	if err != nil {
		return upOutcome{kind: failed, err: fmt.Errorf("NewAllocator: %w", err), dur: time.Since(start)}
	}
	res, err := a.Allocate(ctx, node, claims)
	o := upOutcome{results: res, err: err, dur: time.Since(start)}
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil):
		o.kind = timeout
	case err != nil:
		o.kind = failed
	case res == nil:
		o.kind = noFit
	default:
		o.kind = fit
	}
	return o
}

// unexpectedUpstreamErr reports whether an upstream error is one that the
// generator should never provoke (a harness or generator bug), as opposed
// to a legitimate "cannot allocate here".
func unexpectedUpstreamErr(err error) bool {
	if err == nil || errors.Is(err, structured.ErrFailedAllocationOnNode) || constraintErr(err) {
		return false
	}
	msg := err.Error()
	for _, ok := range []string{
		"asks for all devices, but resource pool",
	} {
		if strings.Contains(msg, ok) {
			return false
		}
	}
	return true
}
