package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// claimName returns the name of the claim behind one of the pod's
// spec.resourceClaims entries. known is false while the claim
// controller has not recorded the name of a template's claim; an empty
// name with known means the entry needs no claim.
func claimName(pod *corev1.Pod, rc corev1.PodResourceClaim) (name string, known bool) {
	if rc.ResourceClaimName != nil {
		return *rc.ResourceClaimName, true
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == rc.Name {
			if s.ResourceClaimName == nil {
				return "", true
			}
			return *s.ResourceClaimName, true
		}
	}
	return "", false
}

// handle is one driver's part of a claim's allocation.
type handle struct {
	driver     string
	data       string
	structured []byte // JSON of the StructuredResourceHandle, nil if none
}

// readyClaim is a claim that may be prepared for a pod.
type readyClaim struct {
	claim   *resourcev1alpha2.ResourceClaim
	handles []handle
}

// claimCheck is the outcome of checking a pod's claims: the ready ones,
// or what the pod waits for.
type claimCheck struct {
	ready    []readyClaim
	problems []string
	keys     []string // NAMESPACE/NAME of every claim the pod uses
}

// checkClaims reads every claim of pod (from the informer's cache, or
// from the API server for those in reread) and checks that it is
// allocated, reserved for the pod and usable on this node.
func (m *Manager) checkClaims(ctx context.Context, pod *corev1.Pod, reread map[string]bool) claimCheck {
	var out claimCheck
	for _, rc := range pod.Spec.ResourceClaims {
		name, known := claimName(pod, rc)
		switch {
		case !known:
			out.problems = append(out.problems, fmt.Sprintf("the claim of entry %q (template %s) is not created yet", rc.Name, ptrString(rc.ResourceClaimTemplateName)))
			continue
		case name == "":
			continue
		}
		key := pod.Namespace + "/" + name
		out.keys = append(out.keys, key)
		claim, err := m.readClaim(ctx, pod.Namespace, name, reread[key])
		switch {
		case apierrors.IsNotFound(err):
			out.problems = append(out.problems, fmt.Sprintf("claim %s does not exist", key))
			continue
		case err != nil:
			out.problems = append(out.problems, fmt.Sprintf("read claim %s: %v", key, err))
			continue
		}
		handles, problem := m.checkClaim(ctx, pod, claim)
		if problem != "" {
			out.problems = append(out.problems, fmt.Sprintf("claim %s %s", key, problem))
			continue
		}
		out.ready = append(out.ready, readyClaim{claim: claim, handles: handles})
	}
	return out
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readClaim returns a claim from the cache, or from the API server when
// fresh is set (after a driver answered NOT_FOUND).
func (m *Manager) readClaim(ctx context.Context, ns, name string, fresh bool) (*resourcev1alpha2.ResourceClaim, error) {
	if !fresh {
		return m.claims.Get(ns, name)
	}
	actx, cancel := m.apiContext(ctx)
	defer cancel()
	return m.opts.Client.ResourceClaims(ns).Get(actx, name)
}

// checkClaim returns a claim's handles, or what is missing for pod to use
// it (a phrase to follow the claim's name).
func (m *Manager) checkClaim(ctx context.Context, pod *corev1.Pod, claim *resourcev1alpha2.ResourceClaim) ([]handle, string) {
	a := claim.Status.Allocation
	switch {
	case a == nil:
		return nil, "is not allocated"
	case claim.Status.DeallocationRequested:
		return nil, "is being deallocated"
	case !reservedFor(claim, pod.UID):
		return nil, "is not reserved for the pod"
	}
	handles, problem := claimHandles(claim)
	if problem != "" {
		return nil, problem
	}
	if !m.usableHere(ctx, claim) {
		return nil, fmt.Sprintf("is allocated on other nodes, not on %s", m.opts.NodeName)
	}
	return handles, ""
}

func reservedFor(claim *resourcev1alpha2.ResourceClaim, uid types.UID) bool {
	return slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1alpha2.ResourceClaimConsumerReference) bool {
		return r.APIGroup == "" && r.Resource == "pods" && r.UID == uid
	})
}

// claimHandles returns the allocation's handles, one per driver. An
// allocation without handles goes to the claim's driver with empty data,
// as with the kubelet.
func claimHandles(claim *resourcev1alpha2.ResourceClaim) ([]handle, string) {
	rhs := claim.Status.Allocation.ResourceHandles
	if len(rhs) == 0 {
		rhs = []resourcev1alpha2.ResourceHandle{{}}
	}
	out := make([]handle, 0, len(rhs))
	for _, rh := range rhs {
		h := handle{driver: rh.DriverName, data: rh.Data}
		if h.driver == "" {
			h.driver = claim.Status.DriverName
		}
		if h.driver == "" {
			return nil, "has an allocation that names no driver"
		}
		if slices.ContainsFunc(out, func(o handle) bool { return o.driver == h.driver }) {
			return nil, fmt.Sprintf("has two resource handles for driver %s", h.driver)
		}
		if rh.StructuredData != nil {
			data, err := json.Marshal(rh.StructuredData)
			if err != nil {
				return nil, fmt.Sprintf("has a structured handle that cannot be encoded: %v", err)
			}
			h.structured = data
		}
		out = append(out, h)
	}
	return out, ""
}

// usableHere reports whether the claim's allocation is usable on this
// node: its availableOnNodes selects the node and no structured handle
// names another node. The Node's labels are read again once before a
// claim is found unusable, in case they changed.
func (m *Manager) usableHere(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) bool {
	a := claim.Status.Allocation
	for _, rh := range a.ResourceHandles {
		if sd := rh.StructuredData; sd != nil && sd.NodeName != "" && sd.NodeName != m.opts.NodeName {
			return false
		}
	}
	if a.AvailableOnNodes == nil {
		return true
	}
	_, labels, err := m.node.get(ctx)
	if err == nil && a.AvailableOnNodes.Matches(m.opts.NodeName, labels) {
		return true
	}
	if m.node.refresh(ctx) != nil {
		return false
	}
	_, labels, err = m.node.get(ctx)
	return err == nil && a.AvailableOnNodes.Matches(m.opts.NodeName, labels)
}
