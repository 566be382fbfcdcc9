package apiserver

import (
	"context"
	"fmt"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/internal/storage"
)

// bindClaim computes the new state of one claim of a binding: its
// allocation (when given) and the pod's reservation. It returns the write
// and the (node, driver) pairs of its structured allocations.
func (s *Server) bindClaim(ctx context.Context, ck *kind, pod *corev1.Pod, node *corev1.Node, bc corev1.BindingResourceClaim, path *field.Path) (storage.Op, [][2]string, error) {
	gr := ck.groupResource()
	named := podUsesClaim(pod, bc.Name)
	obj, err := s.readClaimForBinding(ctx, ck, pod.Namespace, bc)
	if apierrors.IsNotFound(err) && !named {
		err = nil // the pod does not use it either: say that
	}
	if err != nil {
		return storage.Op{}, nil, err
	}
	var old *resourcev1alpha2.ResourceClaim
	switch c := obj.(type) {
	case *resourcev1.ResourceClaim:
		// Stored as resource.k8s.io/v1: bound through its own version.
		return s.bindClaimV1(c, pod, node, bc, named, path)
	case *resourcev1alpha2.ResourceClaim:
		old = c
	}
	if old != nil && bc.Name == pod.ExtendedResourceClaimName() {
		return storage.Op{}, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: claim %s is a resource.k8s.io/v1alpha2 claim; the claim of a pod's extended resources is a resource.k8s.io/v1 claim", path.Child("name"), bc.Name))
	}
	var claimObj runtime.Object
	if old != nil {
		claimObj = old
	}
	rev, err := claimBindingPrologue(gr, pod, claimObj, named, bc, path)
	if err != nil {
		return storage.Op{}, nil, err
	}
	claim := old.DeepCopy()
	var structured [][2]string
	if bc.Allocation != nil && len(bc.Allocation.Raw) > 0 {
		if claim.Status.Allocation != nil {
			return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, fmt.Errorf("claim %s is already allocated", bc.Name))
		}
		alloc := &resourcev1alpha2.AllocationResult{}
		if err := scheme.DecodeStrictInto(bc.Allocation.Raw, alloc); err != nil {
			return storage.Op{}, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %v", path.Child("allocation"), err))
		}
		claim.Status.Allocation = alloc
		claim.Status.DriverName = bc.DriverName
		for _, h := range alloc.ResourceHandles {
			if h.StructuredData == nil {
				continue
			}
			if h.StructuredData.NodeName != node.Name {
				return storage.Op{}, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: structured allocation on node %q cannot be bound to node %q", path.Child("allocation"), h.StructuredData.NodeName, node.Name))
			}
			structured = append(structured, [2]string{node.Name, h.DriverName})
		}
		if len(structured) > 0 {
			addDeleteProtection(claim)
		}
	}
	if err := reserveFor(claim, pod, node); err != nil {
		return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, err)
	}
	op, err := claimBindingWrite(ck, claim, old, rev)
	return op, structured, err
}

// addDeleteProtection adds the finalizer a structured allocation holds
// its claim with, of either version, unless it is there.
func addDeleteProtection(claim metav1.Object) {
	if !hasString(claim.GetFinalizers(), resourcev1alpha2.DeleteProtectionFinalizer) {
		claim.SetFinalizers(append(claim.GetFinalizers(), resourcev1alpha2.DeleteProtectionFinalizer))
	}
}

// claimBindingWrite validates a claim's status as the binding leaves it
// and returns the guarded write of it in kind ck.
func claimBindingWrite(ck *kind, claim, old runtime.Object, rev int64) (storage.Op, error) {
	acc, _ := meta.Accessor(claim)
	if errs := validation.ValidateStatusUpdate(claim, old); len(errs) > 0 {
		return storage.Op{}, apierrors.NewInvalid(ck.gvk.GroupKind(), acc.GetName(), errs)
	}
	data, err := encodeForStorage(ck, claim)
	if err != nil {
		return storage.Op{}, apierrors.NewInternalError(err)
	}
	return storage.Update(ck.storageKey(acc.GetNamespace(), acc.GetName()), data, rev), nil
}

// claimBindingPrologue checks a claim of either version for a binding:
// the pod uses it, or it is the claim generated for one of the pod's
// template entries whose name the claim controller has not recorded in
// the pod's status yet (the binding records it); it has not changed since
// the binding's resourceVersion and is not being deleted. claim is nil
// when it does not exist. It returns the claim's revision.
func claimBindingPrologue(gr schema.GroupResource, pod *corev1.Pod, claim runtime.Object, named bool, bc corev1.BindingResourceClaim, path *field.Path) (int64, error) {
	if !named {
		entry := ""
		if claim != nil {
			entry = unrecordedEntryOf(pod, claim)
		}
		if entry == "" {
			return 0, apierrors.NewBadRequest(fmt.Sprintf("%s: pod %s does not use claim %q", path.Child("name"), pod.Name, bc.Name))
		}
		name := bc.Name
		pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: &name})
	}
	acc, err := meta.Accessor(claim)
	if err != nil {
		return 0, apierrors.NewInternalError(err)
	}
	rev, _ := revisionOf(claim)
	if bc.ResourceVersion != "" && bc.ResourceVersion != acc.GetResourceVersion() {
		return 0, apierrors.NewConflict(gr, bc.Name, fmt.Errorf("claim changed since resourceVersion %s", bc.ResourceVersion))
	}
	if acc.GetDeletionTimestamp() != nil {
		return 0, apierrors.NewConflict(gr, bc.Name, fmt.Errorf("claim %s is being deleted", bc.Name))
	}
	return rev, nil
}

// readClaimForBinding reads a claim of a binding in the version it is
// stored in (a *resourcev1alpha2.ResourceClaim or a
// *resourcev1.ResourceClaim, whichever of ck and its sibling that is;
// never a view, so a v1 claim is decoded once and not converted): from
// the watch cache when the cache holds the very version the binding was
// decided on (bc.ResourceVersion), else from etcd. Either way the
// transaction compares the claim's revision, so a claim changed since
// fails the binding exactly as a read from etcd would have.
func (s *Server) readClaimForBinding(ctx context.Context, ck *kind, ns string, bc corev1.BindingResourceClaim) (runtime.Object, error) {
	key := ck.storageKey(ns, bc.Name)
	if bc.ResourceVersion != "" && ctx.Value(freshKey{}) == nil {
		if c, err := s.cacheFor(ck); err == nil {
			cached, ok, _, err := c.Get(ctx, key, 0)
			if err == nil && ok && strconv.FormatInt(cached.KV.ModRevision, 10) == bc.ResourceVersion {
				if obj, _, err := decodeNative(ck, cached.KV.Value, cached.KV.ModRevision); err == nil {
					return obj, nil
				}
			}
		}
	}
	kv, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, apiError(ck, bc.Name, err)
	}
	obj, _, err := decodeNative(ck, kv.Value, kv.ModRevision)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// reserveFor adds the pod to the claim's reservedFor, checking that the
// claim is allocated, usable on the node and not being deallocated.
func reserveFor(claim *resourcev1alpha2.ResourceClaim, pod *corev1.Pod, node *corev1.Node) error {
	a := claim.Status.Allocation
	switch {
	case a == nil:
		return fmt.Errorf("claim %s is not allocated", claim.Name)
	case claim.Status.DeallocationRequested:
		return fmt.Errorf("claim %s is being deallocated", claim.Name)
	case !a.AvailableOnNodes.Matches(node.Name, node.Labels):
		return fmt.Errorf("claim %s is not available on node %s", claim.Name, node.Name)
	}
	for _, r := range claim.Status.ReservedFor {
		if r.UID == pod.UID {
			return nil
		}
	}
	if len(claim.Status.ReservedFor) > 0 && !a.Shareable {
		return fmt.Errorf("claim %s is not shareable and already reserved for %s", claim.Name, claim.Status.ReservedFor[0].Name)
	}
	if len(claim.Status.ReservedFor) >= resourcev1alpha2.ResourceClaimReservedForMaxSize {
		return fmt.Errorf("claim %s already has the maximum of %d consumers", claim.Name, resourcev1alpha2.ResourceClaimReservedForMaxSize)
	}
	claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{
		Resource: "pods", Name: pod.Name, UID: pod.UID,
	})
	return nil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
