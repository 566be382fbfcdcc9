package devicetainteviction

import (
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// Informer indexes, named for this controller so that they do not clash
// with other controllers' on the shared informers.
const (
	// reservedPodIndex: claims by the UID of each pod in reservedFor.
	reservedPodIndex = "device-taint-eviction-reserved-pod"
	// allocatedPoolIndex: claims by "driver/pool" of each allocated device.
	allocatedPoolIndex = "device-taint-eviction-allocated-pool"
	// slicePoolIndex: slices by "driver/pool".
	slicePoolIndex = "device-taint-eviction-pool"
)

func poolKey(driver, pool string) string { return driver + "/" + pool }

func reservedPods(refs []types.UID) []string {
	out := make([]string, len(refs))
	for i, uid := range refs {
		out[i] = string(uid)
	}
	return out
}

func reservedPodKeysV1(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, nil
	}
	var uids []types.UID
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			uids = append(uids, r.UID)
		}
	}
	return reservedPods(uids), nil
}

func reservedPodKeysSeed(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1alpha2.ResourceClaim)
	if !ok {
		return nil, nil
	}
	var uids []types.UID
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			uids = append(uids, r.UID)
		}
	}
	return reservedPods(uids), nil
}

func allocatedPoolKeysV1(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, u := range usesV1(c) {
		if k := poolKey(u.Driver, u.Pool); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func allocatedPoolKeysSeed(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1alpha2.ResourceClaim)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, u := range usesSeed(c) {
		if k := poolKey(u.Driver, u.Pool); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func slicePoolKeys(obj any) ([]string, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, nil
	}
	return []string{poolKey(s.Spec.Driver, s.Spec.Pool.Name)}, nil
}

// usesV1 lists the devices of a v1 claim's allocation.
func usesV1(c *resourcev1.ResourceClaim) []DeviceUse {
	if c.Status.Allocation == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	out := make([]DeviceUse, 0, len(c.Status.Allocation.Devices.Results))
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, DeviceUse{Claim: key, Driver: r.Driver, Pool: r.Pool, Device: r.Device, Tolerations: r.Tolerations})
	}
	return out
}

// usesSeed lists the devices of a seed claim's structured allocation, as
// the one device inventory projects them: the driver, the node as pool,
// SeedDeviceName of the instance. Allocations made by a driver
// controller hold no device the inventory knows.
func usesSeed(c *resourcev1alpha2.ResourceClaim) []DeviceUse {
	if c.Status.Allocation == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	var out []DeviceUse
	for _, h := range c.Status.Allocation.ResourceHandles {
		sd := h.StructuredData
		if sd == nil || sd.Partitionable == nil {
			continue
		}
		for _, in := range sd.Partitionable.Instances {
			out = append(out, DeviceUse{Claim: key, Driver: h.DriverName, Pool: sd.NodeName, Device: allocator.SeedDeviceName(in.ID), Seed: true})
		}
	}
	return out
}

// reservedFor returns the pods a claim is reserved for.
func reservedForV1(c *resourcev1.ResourceClaim) []types.NamespacedName {
	var out []types.NamespacedName
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, types.NamespacedName{Namespace: c.Namespace, Name: r.Name})
		}
	}
	return out
}

func reservedForSeed(c *resourcev1alpha2.ResourceClaim) []types.NamespacedName {
	var out []types.NamespacedName
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, types.NamespacedName{Namespace: c.Namespace, Name: r.Name})
		}
	}
	return out
}

// podUses lists the devices held by the claims reserved for the pod.
func (c *Controller) podUses(pod *corev1.Pod) ([]DeviceUse, error) {
	var uses []DeviceUse
	objs, err := c.claimsV1.GetIndexer().ByIndex(reservedPodIndex, string(pod.UID))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if cl, ok := o.(*resourcev1.ResourceClaim); ok && cl.Namespace == pod.Namespace {
			uses = append(uses, usesV1(cl)...)
		}
	}
	objs, err = c.claims.GetIndexer().ByIndex(reservedPodIndex, string(pod.UID))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if cl, ok := o.(*resourcev1alpha2.ResourceClaim); ok && cl.Namespace == pod.Namespace {
			uses = append(uses, usesSeed(cl)...)
		}
	}
	return uses, nil
}

// hasClaims reports whether any claim is reserved for the pod.
func (c *Controller) hasClaims(pod *corev1.Pod) bool {
	for _, inf := range []cache.SharedIndexInformer{c.claimsV1, c.claims} {
		if keys, err := inf.GetIndexer().IndexKeys(reservedPodIndex, string(pod.UID)); err == nil && len(keys) > 0 {
			return true
		}
	}
	return false
}

// taintsOf returns the taints on a device: its own, from the slices of
// the pool's newest generation, then the rules', in rule name order.
// override, when set, replaces the rule of its name (to simulate another
// effect).
func (c *Controller) taintsOf(override *resourcev1.DeviceTaintRule) TaintsOf {
	rules, _ := c.rules.Lister().List(everything)
	if override != nil {
		rules = slices.DeleteFunc(rules, func(r *resourcev1.DeviceTaintRule) bool { return r.Name == override.Name })
		rules = append(rules, override)
	}
	slices.SortFunc(rules, func(a, b *resourcev1.DeviceTaintRule) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return func(u DeviceUse) []Taint {
		var out []Taint
		if !u.Seed {
			for _, t := range c.deviceTaints(u.Driver, u.Pool, u.Device) {
				out = append(out, Taint{DeviceTaint: t})
			}
		}
		for _, r := range rules {
			if r.DeletionTimestamp == nil && useSelected(r, u) {
				out = append(out, Taint{DeviceTaint: r.Spec.Taint, Rule: r.Name, RuleUID: r.UID})
			}
		}
		return out
	}
}

// useSelected reports whether a rule selects the device of a use: the
// device itself, or for a seed instance also a leaf below it (the rule
// names the leaf's projection, "gpu-0--halves--half-0" below "gpu-0").
// A rule being deleted still selects (its pods must be looked at again).
func useSelected(r *resourcev1.DeviceTaintRule, u DeviceUse) bool {
	if ruleSelects(r, u.Driver, u.Pool, u.Device) {
		return true
	}
	sel := r.Spec.DeviceSelector
	return u.Seed && sel != nil && sel.Device != nil && strings.HasPrefix(*sel.Device, u.Device+"--") &&
		ruleSelects(r, u.Driver, u.Pool, *sel.Device)
}

// deviceTaints returns a device's own taints in the newest generation of
// its pool.
func (c *Controller) deviceTaints(driver, pool, device string) []resourcev1.DeviceTaint {
	objs, err := c.slices.GetIndexer().ByIndex(slicePoolIndex, poolKey(driver, pool))
	if err != nil || len(objs) == 0 {
		return nil
	}
	var newest int64
	for i, o := range objs {
		if s, ok := o.(*resourcev1.ResourceSlice); ok && (i == 0 || s.Spec.Pool.Generation > newest) {
			newest = s.Spec.Pool.Generation
		}
	}
	for _, o := range objs {
		s, ok := o.(*resourcev1.ResourceSlice)
		if !ok || s.Spec.Pool.Generation != newest {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == device {
				return s.Spec.Devices[i].Taints
			}
		}
	}
	return nil
}
