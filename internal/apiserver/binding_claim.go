package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
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
	if obj != nil {
		old = obj.(*resourcev1alpha2.ResourceClaim)
		if resourcev1alpha2.IsView(old) {
			// Stored as resource.k8s.io/v1: bound through its own version.
			return s.bindClaimV1(ctx, pod, node, bc, path)
		}
	}
	if !named {
		// A claim generated for one of the pod's template entries, whose
		// name the claim controller has not recorded in the pod's status
		// yet: the binding records it.
		entry := unrecordedEntry(pod, old)
		if entry == "" {
			return storage.Op{}, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: pod %s does not use claim %q", path.Child("name"), pod.Name, bc.Name))
		}
		name := old.Name
		pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: &name})
	}
	rev, _ := revisionOf(old)
	if bc.ResourceVersion != "" && bc.ResourceVersion != old.ResourceVersion {
		return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, fmt.Errorf("claim changed since resourceVersion %s", bc.ResourceVersion))
	}
	claim := old.DeepCopy()
	if claim.DeletionTimestamp != nil {
		return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, fmt.Errorf("claim %s is being deleted", bc.Name))
	}
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
		if len(structured) > 0 && !hasString(claim.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer) {
			claim.Finalizers = append(claim.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer)
		}
	}
	if err := reserveFor(claim, pod, node); err != nil {
		return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, err)
	}
	if errs := validation.ValidateStatusUpdate(claim, old); len(errs) > 0 {
		return storage.Op{}, nil, apierrors.NewInvalid(ck.gvk.GroupKind(), bc.Name, errs)
	}
	data, err := encodeForStorage(ck, claim)
	if err != nil {
		return storage.Op{}, nil, apierrors.NewInternalError(err)
	}
	return storage.Update(ck.storageKey(claim.Namespace, claim.Name), data, rev), structured, nil
}

// unrecordedEntry returns the template entry of the pod that claim was
// generated for (resourcev1alpha2.GeneratedFor), when the pod's status
// records no claim for that entry; "" otherwise.
func unrecordedEntry(pod *corev1.Pod, claim *resourcev1alpha2.ResourceClaim) string {
	if claim == nil {
		return ""
	}
	uid, entry, ok := resourcev1alpha2.GeneratedFor(claim)
	if !ok || uid != pod.UID {
		return ""
	}
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.Name != entry || pc.ResourceClaimTemplateName == nil {
			continue
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == entry {
				return "" // recorded, for another claim
			}
		}
		return entry
	}
	return ""
}

// readClaimForBinding reads a claim of a binding: from the watch cache
// when the cache holds the very version the binding was decided on
// (bc.ResourceVersion), else from etcd. Either way the transaction
// compares the claim's revision, so a claim changed since fails the
// binding exactly as a read from etcd would have.
func (s *Server) readClaimForBinding(ctx context.Context, ck *kind, ns string, bc corev1.BindingResourceClaim) (runtime.Object, error) {
	if bc.ResourceVersion != "" && ctx.Value(freshKey{}) == nil {
		if obj, err := s.cachedGet(ctx, ck, ns, bc.Name); err == nil {
			if acc, err := meta.Accessor(obj); err == nil && acc.GetResourceVersion() == bc.ResourceVersion {
				return obj, nil
			}
		}
	}
	return s.getObj(ctx, ck, ns, bc.Name)
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
