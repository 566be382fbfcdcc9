package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

func authorizeDriver(a Attributes, lk Lookup) Decision {
	switch {
	case isRead(a.Verb):
		return allow("%s may read everything", a.User)
	case a.is(grEvents, "") && slices.Contains(eventVerbs, a.Verb):
		return allow("%s may write events", a.User)
	case a.is(grClaims, "status") && slices.Contains(updateVerbs, a.Verb):
		return driverClaim(a, lk)
	case a.is(grClaims, "") && slices.Contains(updateVerbs, a.Verb):
		if d := claimFinalizersOnly(a, lk); !d.Allowed {
			return d
		}
		return driverClaim(a, lk)
	case a.is(grSchedContexts, "status") && slices.Contains(updateVerbs, a.Verb):
		return driverSchedulingContext(a, lk)
	case (a.is(grClaimParameters, "") || a.is(grClassParameters, "")) && slices.Contains(crudVerbs, a.Verb):
		return driverParameters(a)
	case a.is(grResourceSlices, "") && slices.Contains(crudVerbs, a.Verb):
		return ownResourceSlice(a, sliceField{"spec.driver", a.User.Name, func(s *resourcev1.ResourceSlice) string { return s.Spec.Driver }})
	case a.is(grDeviceTaintRules, "") && slices.Contains(crudVerbs, a.Verb):
		return driverTaintRule(a)
	}
	return deny("%s may not %s %s: drivers write only events, status and finalizers of claims of their classes, "+
		"status of scheduling contexts of their pods, parameters generated from their API group, their ResourceSlices "+
		"and DeviceTaintRules selecting their devices",
		a.User, a.Verb, a.resourceString())
}

// driverTaintRule allows a write of a DeviceTaintRule whose
// spec.deviceSelector.driver is the driver, as stored and as written:
// drivers taint their own devices this way (Intel's Gaudi driver writes
// NoExecute rules for unhealthy devices), never another driver's, and
// never every device (a rule without a driver).
func driverTaintRule(a Attributes) Decision {
	for _, obj := range a.judgedObjects() {
		r, err := as[resourcev1.DeviceTaintRule](obj)
		if err != nil {
			return deny("%s: read DeviceTaintRule: %v", a.User, err)
		}
		var got string
		if sel := r.Spec.DeviceSelector; sel != nil && sel.Driver != nil {
			got = *sel.Driver
		}
		if got != a.User.Name {
			return deny("%s may only write DeviceTaintRules with spec.deviceSelector.driver %q, not %q", a.User, a.User.Name, got)
		}
	}
	return allow("%s may write DeviceTaintRules selecting devices of driver %q", a.User, a.User.Name)
}

// driverClaim allows a write of a claim whose class names the driver. When
// the class is gone, a claim the driver already allocated (stored
// status.driverName) stays its own, so it can still deallocate it.
func driverClaim(a Attributes, lk Lookup) Decision {
	claim, v1claim, err := storedClaim(a, lk)
	if err != nil {
		return deny("%s: look up resourceclaim %s/%s: %v", a.User, a.Namespace, a.Name, err)
	}
	if v1claim != nil {
		return driverV1Claim(a, v1claim)
	}
	className := claim.Spec.ResourceClassName
	class, err := lookupClass(lk, className)
	switch {
	case err != nil && claim.Status.DriverName == a.User.Name:
		return allow("%s may write resourceclaims it allocated", a.User)
	case err != nil:
		return deny("%s: look up resourceclass %q: %v", a.User, className, err)
	case class.DriverName != a.User.Name:
		return deny("%s may only write resourceclaims of classes with driverName %q; class %q of claim %s/%s names %q",
			a.User, a.User.Name, className, a.Namespace, a.Name, class.DriverName)
	}
	return allow("%s may write %s of claims of its classes", a.User, a.resourceString())
}

// driverV1Claim allows a write of a resource.k8s.io/v1 claim whose
// allocation names a device of the driver: v1 has no class-to-driver
// link, so a driver owns the claims it was allocated devices in.
func driverV1Claim(a Attributes, claim *resourcev1.ResourceClaim) Decision {
	own := false
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == a.User.Name {
				own = true
			}
		}
	}
	if !own {
		return deny("%s may only write resource.k8s.io/v1 resourceclaims allocated a device of driver %q; claim %s/%s has none",
			a.User, a.User.Name, a.Namespace, a.Name)
	}
	if a.Subresource == "status" {
		updated, ok := a.Object.(*resourcev1.ResourceClaim)
		if !ok {
			return deny("%s: read new resourceclaim: %v", a.User, errNoObject)
		}
		if d := ownDeviceStatusOnly(a, a.User.Name, claim, updated); !d.Allowed {
			return d
		}
	}
	return allow("%s may write %s of claims allocated devices of its own", a.User, a.resourceString())
}

// ownDeviceStatusOnly allows a status write of a v1 claim by driver (a
// driver or node-driver) that changes nothing but the status.devices
// entries of that driver: the
// allocation and reservations are the scheduler's and the claim
// controller's, other drivers' device status theirs.
func ownDeviceStatusOnly(a Attributes, driver string, old, updated *resourcev1.ResourceClaim) Decision {
	others := func(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaimStatus {
		st := c.Status.DeepCopy()
		st.Devices = slices.DeleteFunc(st.Devices, func(d resourcev1.AllocatedDeviceStatus) bool { return d.Driver == driver })
		if len(st.Devices) == 0 {
			st.Devices = nil
		}
		return st
	}
	if !equality.Semantic.DeepEqual(others(old), others(updated)) {
		return deny("%s may only change status.devices entries of driver %q in resourceclaim %s/%s, not its allocation, reservations or other drivers' devices",
			a.User, driver, a.Namespace, a.Name)
	}
	return Decision{Allowed: true}
}

// driverSchedulingContext allows a status update of a PodSchedulingContext
// when one of its pod's claims has a class of the driver. The context is
// named after its pod.
func driverSchedulingContext(a Attributes, lk Lookup) Decision {
	pod, err := lookupPod(lk, a.Namespace, a.Name)
	if err != nil {
		return deny("%s: look up pod %s/%s: %v", a.User, a.Namespace, a.Name, err)
	}
	var errs []error
	for _, claimName := range pod.ResourceClaimNames() {
		claim, err := lookupClaim(lk, a.Namespace, claimName)
		if err != nil {
			errs = append(errs, fmt.Errorf("look up resourceclaim %s: %w", claimName, err))
			continue
		}
		class, err := lookupClass(lk, claim.Spec.ResourceClassName)
		if err != nil {
			errs = append(errs, fmt.Errorf("look up resourceclass %s: %w", claim.Spec.ResourceClassName, err))
			continue
		}
		if class.DriverName == a.User.Name {
			return allow("%s may update scheduling contexts of pods with claims of its classes", a.User)
		}
	}
	reason := fmt.Sprintf("%s may only update the status of scheduling contexts of pods with a claim of its classes; pod %s/%s has none",
		a.User, a.Namespace, a.Name)
	if err := errors.Join(errs...); err != nil {
		reason += " (" + strings.ReplaceAll(err.Error(), "\n", "; ") + ")"
	}
	return Decision{Reason: reason}
}

// driverParameters allows writes of claim and class parameters generated
// from an API group of the driver, judged on both the new and the stored
// object, so a driver can neither create nor take over another's.
func driverParameters(a Attributes) Decision {
	for _, obj := range a.judgedObjects() {
		group, err := generatedFromGroup(a.groupResource(), obj)
		if err != nil {
			return deny("%s: read %s: %v", a.User, a.resourceString(), err)
		}
		if !driverOwnsGroup(a.User.Name, group) {
			return deny("%s may only write %s generated from its own API group; generatedFrom.apiGroup is %q",
				a.User, a.resourceString(), group)
		}
	}
	return allow("%s may write %s generated from its API group", a.User, a.resourceString())
}

func generatedFromGroup(gr groupResource, obj runtime.Object) (string, error) {
	if gr == grClaimParameters {
		p, err := as[resourcev1alpha2.ResourceClaimParameters](obj)
		if err != nil || p.GeneratedFrom == nil {
			return "", err
		}
		return p.GeneratedFrom.APIGroup, nil
	}
	p, err := as[resourcev1alpha2.ResourceClassParameters](obj)
	if err != nil || p.GeneratedFrom == nil {
		return "", err
	}
	return p.GeneratedFrom.APIGroup, nil
}

// driverOwnsGroup reports whether driver may write objects generated from
// group: the same name, or driver is a subdomain of group
// (cards.dra.example.com owns dra.example.com). A group without a dot only
// matches exactly, so no driver owns a top-level domain like "com".
func driverOwnsGroup(driver, group string) bool {
	if group == "" {
		return false
	}
	return driver == group || (strings.Contains(group, ".") && strings.HasSuffix(driver, "."+group))
}
