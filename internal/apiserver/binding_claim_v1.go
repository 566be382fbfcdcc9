package apiserver

import (
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/internal/storage"
)

// SharedFenceNode is the node name of the allocation fences of devices
// that are not local to one node (v1 pools with nodeSelector or allNodes,
// or per-device node selection): one fence per driver for the whole
// cluster, listed by the writer next to its per-node fences.
const SharedFenceNode = "_shared"

// bindClaimV1 is bindClaim for a claim stored as resource.k8s.io/v1, old
// as bindClaim read it: the allocation in the binding is a v1
// AllocationResult (every v1 allocation is structured), fenced per
// (node, driver) of its devices.
func (s *Server) bindClaimV1(old *resourcev1.ResourceClaim, pod *corev1.Pod, node *corev1.Node, bc corev1.BindingResourceClaim, named bool, path *field.Path) (storage.Op, [][2]string, error) {
	ck := s.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	gr := ck.groupResource()
	rev, err := claimBindingPrologue(gr, pod, old, named, bc, path)
	if err != nil {
		return storage.Op{}, nil, err
	}
	if bc.Name == pod.ExtendedResourceClaimName() {
		if err := checkExtendedResourceClaim(pod, old, path); err != nil {
			return storage.Op{}, nil, err
		}
	}
	claim := old.DeepCopy()
	var fenced [][2]string
	if bc.Allocation != nil && len(bc.Allocation.Raw) > 0 {
		if claim.Status.Allocation != nil {
			return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, fmt.Errorf("claim %s is already allocated", bc.Name))
		}
		alloc := &resourcev1.AllocationResult{}
		if err := scheme.DecodeStrictInto(bc.Allocation.Raw, alloc); err != nil {
			return storage.Op{}, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %v", path.Child("allocation"), err))
		}
		claim.Status.Allocation = alloc
		for _, r := range alloc.Devices.Results {
			key := [2]string{node.Name, r.Driver}
			if !slices.Contains(fenced, key) {
				fenced = append(fenced, key)
			}
		}
		if len(fenced) > 0 {
			addDeleteProtection(claim)
		}
	}
	if err := reserveForV1(claim, pod, node); err != nil {
		return storage.Op{}, nil, apierrors.NewConflict(gr, bc.Name, err)
	}
	op, err := claimBindingWrite(ck, claim, old, rev)
	return op, fenced, err
}

// reserveForV1 adds the pod to a v1 claim's reservedFor, checking that
// the claim is allocated and usable on the node. v1 claims are shareable:
// up to ResourceClaimReservedForMaxSize consumers.
func reserveForV1(claim *resourcev1.ResourceClaim, pod *corev1.Pod, node *corev1.Node) error {
	a := claim.Status.Allocation
	if a == nil {
		return fmt.Errorf("claim %s is not allocated", claim.Name)
	}
	if a.NodeSelector != nil {
		if !resourceconv.NodeSelectorFromKube(a.NodeSelector).Matches(node.Name, node.Labels) {
			return fmt.Errorf("claim %s is not available on node %s", claim.Name, node.Name)
		}
	}
	for _, r := range claim.Status.ReservedFor {
		if r.UID == pod.UID {
			return nil
		}
	}
	if len(claim.Status.ReservedFor) >= resourcev1.ResourceClaimReservedForMaxSize {
		return fmt.Errorf("claim %s already has the maximum of %d consumers", claim.Name, resourcev1.ResourceClaimReservedForMaxSize)
	}
	claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
		Resource: "pods", Name: pod.Name, UID: pod.UID,
	})
	return nil
}

// unrecordedEntryOf is unrecordedEntry for a claim of any version: the
// template entry of the pod the claim was generated for, when the pod's
// status records no claim for that entry.
func unrecordedEntryOf(pod *corev1.Pod, claim runtime.Object) string {
	acc, err := meta.Accessor(claim)
	if err != nil {
		return ""
	}
	uid, entry, ok := generatedForMeta(acc)
	if !ok || uid != pod.UID {
		return ""
	}
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.Name != entry || pc.ResourceClaimTemplateName == nil {
			continue
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == entry {
				return ""
			}
		}
		return entry
	}
	return ""
}

// generatedForMeta is resourcev1alpha2.GeneratedFor on metadata alone.
func generatedForMeta(m metav1.Object) (types.UID, string, bool) {
	entry, ok := m.GetAnnotations()[resourcev1alpha2.PodClaimNameAnnotation]
	ref := metav1.GetControllerOfNoCopy(m)
	if !ok || ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.UID == "" {
		return "", "", false
	}
	return ref.UID, entry, true
}
