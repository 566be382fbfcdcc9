package auth

import (
	"errors"
	"slices"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
)

// authorizeNodeDriver decides for a node-driver DRIVER@NODE: a driver's
// kubelet plugin on one node, with what the upstream kubelet-plugin
// library needs and no more (see the package doc).
func authorizeNodeDriver(a Attributes, lk Lookup) Decision {
	driver, node := a.User.Driver(), a.User.Node()
	switch {
	case a.is(grResourceSlices, "") && a.Verb == "get":
		return allow("%s may get resourceslices", a.User)
	case a.is(grResourceSlices, "") && (a.Verb == "list" || a.Verb == "watch"):
		return nodeDriverSliceSelector(a)
	case a.is(grResourceSlices, "") && slices.Contains(crudVerbs, a.Verb):
		return ownResourceSlice(a,
			sliceField{"spec.driver", driver, func(s *resourcev1.ResourceSlice) string { return s.Spec.Driver }},
			sliceField{"spec.nodeName", node, func(s *resourcev1.ResourceSlice) string { return ptrString(s.Spec.NodeName) }})
	case a.is(grNodes, "") && a.Verb == "get":
		if a.Name != node {
			return deny("%s may only get its own Node %q, not %q", a.User, node, a.Name)
		}
		return allow("%s may get its own Node", a.User)
	case a.is(grClaims, "") && a.Verb == "get":
		return nodeDriverGetClaim(a, lk)
	case a.is(grClaims, "status") && slices.Contains(updateVerbs, a.Verb):
		return nodeDriverClaimStatus(a, lk)
	case a.is(grEvents, "") && slices.Contains(eventVerbs, a.Verb):
		return allow("%s may write events", a.User)
	}
	return deny("%s may not %s %s: node-drivers get, list and watch (with fieldSelector spec.driver=%s,spec.nodeName=%s) and write their node's ResourceSlices, "+
		"get their Node and the resourceclaims of their pods, update those claims' status.devices entries of their driver, and write events",
		a.User, a.Verb, a.resourceString(), driver, node)
}

// nodeDriverSliceSelector allows a list or watch of ResourceSlices whose
// field selector requires spec.driver=DRIVER and spec.nodeName NODE or ""
// (pools that are not per node). Further terms only narrow the answer. The
// server evaluates the selector on every object it returns, so requiring
// the terms narrows what is seen, not only what is asked.
func nodeDriverSliceSelector(a Attributes) Decision {
	driver, node := a.User.Driver(), a.User.Node()
	var hasDriver, hasNode bool
	for _, r := range a.FieldSelector {
		if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
			continue
		}
		switch r.Field {
		case resourcev1.ResourceSliceSelectorDriver:
			hasDriver = hasDriver || r.Value == driver
		case resourcev1.ResourceSliceSelectorNodeName:
			hasNode = hasNode || r.Value == node || r.Value == ""
		}
	}
	if !hasDriver || !hasNode {
		return deny("%s must %s resourceslices with fieldSelector spec.driver=%s,spec.nodeName=%s (or spec.nodeName= for pools that are not per node)",
			a.User, a.Verb, driver, node)
	}
	return allow("%s may %s its resourceslices", a.User, a.Verb)
}

// nodeDriverGetClaim allows a get of a claim the node-driver serves: one
// allocated a device of its driver and reserved for a pod bound to its
// node. A claim that does not exist is allowed, so the answer is 404 as
// upstream's RBAC gives, and the plugin sees the claim is gone.
func nodeDriverGetClaim(a Attributes, lk Lookup) Decision {
	if lk == nil {
		return deny("%s: look up resourceclaim %s/%s: %v", a.User, a.Namespace, a.Name, errNoLookup)
	}
	v1claim, err := lk.GetResourceClaimV1(a.Namespace, a.Name)
	if err == nil && v1claim == nil {
		err = errNotFound
	}
	if isNotFound(err) {
		return allow("%s may get resourceclaim %s/%s, which does not exist", a.User, a.Namespace, a.Name)
	}
	if err != nil {
		return deny("%s: look up resourceclaim %s/%s: %v", a.User, a.Namespace, a.Name, err)
	}
	if _, view := v1claim.Annotations[resourcev1alpha2.StoredVersionAnnotation]; !view {
		return nodeDriverOwnsClaim(a, lk, v1Ownership(v1claim))
	}
	claim, err := lookupClaim(lk, a.Namespace, a.Name)
	if isNotFound(err) {
		return allow("%s may get resourceclaim %s/%s, which does not exist", a.User, a.Namespace, a.Name)
	}
	if err != nil {
		return deny("%s: look up resourceclaim %s/%s: %v", a.User, a.Namespace, a.Name, err)
	}
	return nodeDriverOwnsClaim(a, lk, v1alpha2Ownership(claim))
}

// nodeDriverClaimStatus allows a status write of a resource.k8s.io/v1 claim
// the node-driver serves that changes only its driver's status.devices
// entries.
func nodeDriverClaimStatus(a Attributes, lk Lookup) Decision {
	_, v1claim, err := storedClaim(a, lk)
	if err != nil {
		return deny("%s: look up resourceclaim %s/%s: %v", a.User, a.Namespace, a.Name, err)
	}
	if v1claim == nil {
		return deny("%s may only write the status of resource.k8s.io/v1 resourceclaims", a.User)
	}
	if d := nodeDriverOwnsClaim(a, lk, v1Ownership(v1claim)); !d.Allowed {
		return d
	}
	updated, ok := a.Object.(*resourcev1.ResourceClaim)
	if !ok {
		return deny("%s: read new resourceclaim: %v", a.User, errNoObject)
	}
	if d := ownDeviceStatusOnly(a, a.User.Driver(), v1claim, updated); !d.Allowed {
		return d
	}
	return allow("%s may write status.devices of its driver in claims of pods on its node", a.User)
}

// claimOwnership is what the node-driver rules read of a claim of either
// version.
type claimOwnership struct {
	drivers []string // of the allocation; nil when not allocated
	pods    []podRef // status.reservedFor entries that are pods
}

type podRef struct {
	name string
	uid  types.UID
}

func v1Ownership(c *resourcev1.ResourceClaim) claimOwnership {
	var o claimOwnership
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			o.drivers = append(o.drivers, r.Driver)
		}
	}
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			o.pods = append(o.pods, podRef{r.Name, r.UID})
		}
	}
	return o
}

func v1alpha2Ownership(c *resourcev1alpha2.ResourceClaim) claimOwnership {
	var o claimOwnership
	if c.Status.Allocation != nil {
		o.drivers = append(o.drivers, c.Status.DriverName)
		for _, h := range c.Status.Allocation.ResourceHandles {
			o.drivers = append(o.drivers, h.DriverName)
		}
	}
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			o.pods = append(o.pods, podRef{r.Name, r.UID})
		}
	}
	return o
}

// nodeDriverOwnsClaim allows when the claim is allocated a device of the
// node-driver's driver and reserved for a pod (same UID) bound to its node.
// reservedFor, not the allocation's node selector: a network-attached
// device's selector names many nodes.
func nodeDriverOwnsClaim(a Attributes, lk Lookup, o claimOwnership) Decision {
	driver, node := a.User.Driver(), a.User.Node()
	if !slices.Contains(o.drivers, driver) {
		return deny("%s may only read and write resourceclaims allocated a device of driver %q; claim %s/%s has none",
			a.User, driver, a.Namespace, a.Name)
	}
	for _, ref := range o.pods {
		pod, err := lookupPod(lk, a.Namespace, ref.name)
		if err == nil && pod.UID == ref.uid && pod.Spec.NodeName == node {
			return allow("%s may %s %s of claims of pods on its node", a.User, a.Verb, a.resourceString())
		}
	}
	return deny("%s may only read and write resourceclaims reserved for a pod bound to node %q; claim %s/%s is not",
		a.User, node, a.Namespace, a.Name)
}

func isNotFound(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || errors.Is(err, errNotFound))
}
