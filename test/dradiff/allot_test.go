package dradiff

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/allocator"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The allot side: pkg/allocator's v1 engine, as the scheduler calls it.

type allotOutcome struct {
	kind    outcomeKind
	results []*resourcev1.AllocationResult
	reasons []string
	err     error
	dur     time.Duration
}

// heldClaims are the devices already allocated, as allot sees them: one
// allocated claim of another pod per device.
func heldClaims(c *Case) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for i, h := range c.Holes {
		out = append(out, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: fmt.Sprintf("held-%d", i), UID: types.UID(fmt.Sprintf("uid-held-%d", i))},
			Status: resourcev1.ResourceClaimStatus{
				Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
					Results: []resourcev1.DeviceRequestAllocationResult{{Request: "held", Driver: h.Driver, Pool: h.Pool, Device: h.Device}},
				}},
				ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "other-pod", UID: "uid-other-pod"}},
			},
		})
	}
	for i, sh := range c.Shares {
		out = append(out, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: fmt.Sprintf("shared-%d", i), UID: types.UID(fmt.Sprintf("uid-shared-%d", i))},
			Status: resourcev1.ResourceClaimStatus{
				Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
					Results: []resourcev1.DeviceRequestAllocationResult{{Request: "shared", Driver: sh.Driver, Pool: sh.Pool, Device: sh.Device,
						ShareID: ptr.To(shareUID(i)), ConsumedCapacity: sh.Consumed}},
				}},
				ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "other-pod", UID: "uid-other-pod"}},
			},
		})
	}
	return out
}

// shareUID is the share ID of Case.Shares[i], on both sides.
func shareUID(i int) types.UID {
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
}

func allotNode(n *k8scorev1.Node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, Labels: n.Labels}}
}

func runAllot(c *Case, node *k8scorev1.Node, limit time.Duration) allotOutcome {
	start := time.Now()
	inv := allocator.NewInventory(c.Slices, nil)
	st := allocator.NewState(inv, heldClaims(c), nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod", UID: "uid-pod"}}
	var claims []allocator.V1Claim
	for i, cl := range c.Claims {
		name := cl.Name
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: &name})
		// Admission allows adminAccess only in labelled namespaces; the
		// generated namespace is one.
		claims = append(claims, allocator.V1Claim{Claim: cl, AdminNamespace: true})
	}
	req := allocator.PrepareV1(pod, claims, func(name string) *resourcev1.DeviceClass { return c.class(name) })
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := allocator.AllocateV1(ctx, req, st, allotNode(node))
	o := allotOutcome{err: err, dur: time.Since(start)}
	switch {
	case err != nil && errors.Is(err, allocator.ErrDeadline):
		o.kind = timeout
	case err != nil:
		o.kind = failed
	case res.Fits:
		o.kind = fit
		o.results = res.Allocations
	default:
		o.kind = noFit
		for _, r := range res.Reasons {
			o.reasons = append(o.reasons, r.String())
		}
	}
	return o
}
