package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
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

// entryClaim returns the claim behind the pod's spec.resourceClaims entry
// named entry (a container's resources.claims[].name): found is false when
// the pod has no such entry; otherwise as claimName.
func entryClaim(pod *corev1.Pod, entry string) (name string, known, found bool) {
	i := slices.IndexFunc(pod.Spec.ResourceClaims, func(rc corev1.PodResourceClaim) bool { return rc.Name == entry })
	if i < 0 {
		return "", false, false
	}
	name, known = claimName(pod, pod.Spec.ResourceClaims[i])
	return name, known, true
}

// handle is one driver's part of a claim's allocation.
type handle struct {
	driver     string
	data       string
	structured []byte // JSON of the StructuredResourceHandle, nil if none
	// kubelet: the driver speaks the kubelet's DRA API; it is sent the
	// claim's reference, data and structured are empty.
	kubelet bool
}

// speaksKubelet reports whether driver is registered and speaks the
// kubelet's DRA API.
func (m *Manager) speaksKubelet(driver string) bool {
	d := m.drivers.get(driver)
	return d != nil && d.isKubelet()
}

// readyClaim is a claim that may be prepared for a pod: a v1alpha2
// claim, or the v1alpha2 form of a v1 claim (v1Form).
type readyClaim struct {
	claim *resourcev1alpha2.ResourceClaim
	// version is the apiVersion the claim is stored as (versionV1alpha2,
	// versionV1).
	version string
	handles []handle
}

// claimCheck is the outcome of checking a pod's claims: the ready ones,
// or what the pod waits for.
type claimCheck struct {
	ready    []readyClaim
	problems []string
	keys     []string // NAMESPACE/NAME of every claim the pod uses
}

// checkClaims reads every claim of pod (from the informers' caches, or
// from the API server for those in reread), whichever version it is
// stored as, and checks that it is allocated, reserved for the pod and
// usable on this node. A v1 claim is checked in its v1alpha2 form
// (v1Form).
func (m *Manager) checkClaims(ctx context.Context, pod *corev1.Pod, reread map[string]bool) claimCheck {
	var out claimCheck
	var names []string
	for _, rc := range pod.Spec.ResourceClaims {
		name, known := claimName(pod, rc)
		switch {
		case !known:
			out.problems = append(out.problems, fmt.Sprintf("the claim of entry %q (template %s) is not created yet", rc.Name, ptrString(rc.ResourceClaimTemplateName)))
			continue
		case name == "":
			continue
		}
		names = append(names, name)
	}
	// The claim the scheduler made for the pod's extended resources is
	// prepared as the others are (Kubernetes' kubelet does the same).
	if name := pod.ExtendedResourceClaimName(); name != "" {
		names = append(names, name)
	}
	for _, name := range names {
		key := pod.Namespace + "/" + name
		out.keys = append(out.keys, key)
		claim, claimV1, err := m.readClaim(ctx, pod.Namespace, name, reread[key])
		switch {
		case apierrors.IsNotFound(err):
			out.problems = append(out.problems, fmt.Sprintf("claim %s does not exist", key))
			continue
		case err != nil:
			out.problems = append(out.problems, fmt.Sprintf("read claim %s: %v", key, err))
			continue
		}
		version := versionV1alpha2
		if claimV1 != nil {
			version = versionV1
			var problem string
			if claim, problem = v1Form(claimV1, m.opts.NodeName, m.speaksKubelet); problem != "" {
				out.problems = append(out.problems, fmt.Sprintf("claim %s %s", key, problem))
				continue
			}
		}
		handles, problem := m.checkClaim(ctx, pod, claim, version)
		if problem != "" {
			out.problems = append(out.problems, fmt.Sprintf("claim %s %s", key, problem))
			continue
		}
		out.ready = append(out.ready, readyClaim{claim: claim, version: version, handles: handles})
	}
	return out
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readClaim returns the claim ns/name in the version it is stored as:
// a v1alpha2 claim or a v1 claim, the other nil. It reads the informers'
// caches (a claim is in the one of its version; views never count), or
// the API server when fresh is set (after a driver answered NOT_FOUND).
// A claim in neither is NotFound.
func (m *Manager) readClaim(ctx context.Context, ns, name string, fresh bool) (*resourcev1alpha2.ResourceClaim, *resourcev1.ResourceClaim, error) {
	if fresh {
		return m.readClaimFresh(ctx, ns, name)
	}
	claim, err := m.claims.Get(ns, name)
	switch {
	case err == nil && !resourcev1alpha2.IsView(claim):
		return claim, nil, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, nil, err
	}
	claimV1, err := m.claimsV1.Get(ns, name)
	switch {
	case err != nil:
		return nil, nil, err
	case resourcev1alpha2.IsView(claimV1):
		return nil, nil, apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), name)
	}
	return nil, claimV1, nil
}

// readClaimFresh reads a claim from the API server, first through the
// version the checkpoint records for it (v1alpha2 when none): both
// versions serve every claim, one of them as a view, which sends the
// read to the other version.
func (m *Manager) readClaimFresh(ctx context.Context, ns, name string) (*resourcev1alpha2.ResourceClaim, *resourcev1.ResourceClaim, error) {
	actx, cancel := m.apiContext(ctx)
	defer cancel()
	readV1 := func() (*resourcev1.ResourceClaim, bool, error) {
		c, err := m.opts.Client.ResourceClaimsV1(ns).Get(actx, name)
		if err != nil {
			return nil, false, err
		}
		return c, resourcev1alpha2.IsView(c), nil
	}
	if m.store.versionOf(ns, name) == versionV1 {
		c, view, err := readV1()
		if err != nil || !view {
			return nil, c, err
		}
	}
	c, err := m.opts.Client.ResourceClaims(ns).Get(actx, name)
	switch {
	case err != nil:
		return nil, nil, err
	case !resourcev1alpha2.IsView(c):
		return c, nil, nil
	}
	v1c, view, err := readV1()
	switch {
	case err != nil:
		return nil, nil, err
	case view: // stored as v1alpha2 again between the two reads
		return nil, nil, fmt.Errorf("claim %s/%s changed version while it was read; read again at the next attempt", ns, name)
	}
	return nil, v1c, nil
}

// checkClaim returns a claim's handles, or what is missing for pod to use
// it (a phrase to follow the claim's name). claim is in v1alpha2 form;
// version is the one it is stored as.
func (m *Manager) checkClaim(ctx context.Context, pod *corev1.Pod, claim *resourcev1alpha2.ResourceClaim, version string) ([]handle, string) {
	a := claim.Status.Allocation
	switch {
	case a == nil:
		return nil, "is not allocated"
	case claim.Status.DeallocationRequested:
		return nil, "is being deallocated"
	case !reservedFor(claim, pod.UID):
		return nil, "is not reserved for the pod"
	}
	handles, problem := claimHandles(claim, version)
	if problem != "" {
		return nil, problem
	}
	for i := range handles {
		if handles[i].kubelet = m.speaksKubelet(handles[i].driver); handles[i].kubelet && version != versionV1 {
			return nil, fmt.Sprintf("is stored as %s, but DRA driver %s speaks the kubelet's DRA API, which reads %s claims only: "+
				"create the claim as %s", version, handles[i].driver, versionV1, versionV1)
		}
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

// claimHandles returns the allocation's handles, one per driver. A
// v1alpha2 allocation without handles goes to the claim's driver with
// empty data, as with the kubelet; a v1 allocation without devices needs
// no driver.
func claimHandles(claim *resourcev1alpha2.ResourceClaim, version string) ([]handle, string) {
	rhs := claim.Status.Allocation.ResourceHandles
	if len(rhs) == 0 && version == versionV1 {
		return nil, ""
	}
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
