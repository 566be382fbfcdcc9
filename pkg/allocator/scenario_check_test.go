package allocator_test

// checkV1Result checks a fitting AllocateV1 answer from the devices alone,
// through the exported API, so that a rewritten expected output cannot
// hold an allocation that breaks the rules: every device exists in a
// usable pool, is available on the node, matches its class's and
// request's selectors and tolerates its taints; no device is taken twice
// or while in use (admin access aside); shared counters hold; projected
// seed leaves keep partition locks; counts and constraints hold; the
// result's node selector matches the node.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"allot.dev/allot/pkg/allocator/engine"

	"github.com/cockroachdb/datadriven"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/allocator"
)

// dev is a device of the inventory with its pool.
type dev struct {
	pool *engine.Pool
	d    *engine.Device
}

// attr is the device's value of a fully qualified attribute ("" when it
// has none); names without a domain are in the driver's.
func (x dev) attr(fq resourcev1.FullyQualifiedName) string {
	if a, ok := x.d.Attributes[resourcev1.QualifiedName(fq)]; ok {
		return attributeString(a)
	}
	domain, name, _ := strings.Cut(string(fq), "/")
	if a, ok := x.d.Attributes[resourcev1.QualifiedName(name)]; ok && domain == x.pool.Driver {
		return attributeString(a)
	}
	return ""
}

// v1Alt is one way to satisfy a request: the request itself or one of its
// firstAvailable subrequests, by result name ("req" or "req/sub").
type v1Alt struct {
	class       string
	selectors   []resourcev1.DeviceSelector
	all         bool
	count       int64
	admin       bool
	tolerations []resourcev1.DeviceToleration
}

func v1Alts(c *resourcev1.ResourceClaim) map[string]v1Alt {
	out := map[string]v1Alt{}
	for _, r := range c.Spec.Devices.Requests {
		if e := r.Exactly; e != nil {
			out[r.Name] = v1Alt{e.DeviceClassName, e.Selectors, e.AllocationMode == resourcev1.DeviceAllocationModeAll,
				max(e.Count, 1), e.AdminAccess != nil && *e.AdminAccess, e.Tolerations}
		}
		for _, s := range r.FirstAvailable {
			out[r.Name+"/"+s.Name] = v1Alt{s.DeviceClassName, s.Selectors, s.AllocationMode == resourcev1.DeviceAllocationModeAll,
				max(s.Count, 1), false, s.Tolerations}
		}
	}
	return out
}

// checkV1Result returns the rules the answer breaks.
func checkV1Result(inv *engine.Inventory, st *allocator.State, node *corev1.Node, classes map[string]*resourcev1.DeviceClass,
	claims []allocator.V1Claim, res *allocator.V1Result) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	devs := map[string]dev{}
	pools := inv.Pools()
	for i := range pools {
		for j := range pools[i].Devices {
			devs[pools[i].Driver+"/"+pools[i].Name+"/"+pools[i].Devices[j].Name] = dev{&pools[i], &pools[i].Devices[j]}
		}
	}
	// Counters left: totals less what devices in use consume.
	left := map[string]*resource.Quantity{}
	counter := func(p *engine.Pool, set, name string) *resource.Quantity {
		k := p.Driver + "/" + p.Name + "/" + set + "/" + name
		if left[k] == nil {
			q := p.Counters[set][name].DeepCopy()
			for _, d := range p.Devices {
				if st.InUse(p.Driver, p.Name, d.Name) {
					for _, c := range d.ConsumesCounters {
						if c.CounterSet == set {
							if v, ok := c.Counters[name]; ok {
								q.Sub(v.Value)
							}
						}
					}
				}
			}
			left[k] = &q
		}
		return left[k]
	}
	var taken []dev
	shares := map[string][]resourcev1.DeviceRequestAllocationResult{}
	for ci, a := range res.Allocations {
		c := claims[ci].Claim
		if c.Status.Allocation != nil {
			if a != nil {
				fail("claim %s was allocated already, got a new allocation", c.Name)
			}
			continue
		}
		if a == nil {
			fail("claim %s has no allocation", c.Name)
			continue
		}
		if sel := a.NodeSelector; sel != nil && !allocator.DeviceAvailableOn(&engine.Device{NodeSelector: sel}, node) {
			fail("claim %s: node selector does not match node %s", c.Name, node.Name)
		}
		alts := v1Alts(c)
		perAlt := map[string][]dev{}
		for _, r := range a.Devices.Results {
			key := r.Driver + "/" + r.Pool + "/" + r.Device
			x, ok := devs[key]
			alt, okAlt := alts[r.Request]
			if !ok || !okAlt {
				fail("claim %s: unknown device %s or request %s", c.Name, key, r.Request)
				continue
			}
			perAlt[r.Request] = append(perAlt[r.Request], x)
			if !x.pool.Usable() || !allocator.DeviceAvailableOn(x.d, node) {
				fail("claim %s: device %s is not usable on node %s", c.Name, key, node.Name)
			}
			in := engine.DeviceSelectorInput{Driver: r.Driver, Attributes: x.d.Attributes, Capacity: x.d.Capacity,
				AllowMultipleAllocations: x.d.AllowMultipleAllocations}
			var sels []resourcev1.DeviceSelector
			if cl := classes[alt.class]; cl != nil {
				sels = cl.Spec.Selectors
			}
			for _, s := range slices.Concat(sels, alt.selectors) {
				if ok, err := engine.MatchDeviceSelector(s.CEL.Expression, in); !ok || err != nil {
					fail("claim %s: device %s does not match %s (%v)", c.Name, key, s.CEL.Expression, err)
				}
			}
			for _, taint := range x.d.Taints {
				if taint.Effect != resourcev1.DeviceTaintEffectNone && !slices.ContainsFunc(alt.tolerations, func(tol resourcev1.DeviceToleration) bool {
					return tolerates(tol, taint)
				}) {
					fail("claim %s: device %s has taint %s=%s:%s not tolerated", c.Name, key, taint.Key, taint.Value, taint.Effect)
				}
			}
			if (r.AdminAccess != nil && *r.AdminAccess) != alt.admin {
				fail("claim %s: device %s adminAccess %v", c.Name, key, r.AdminAccess)
			}
			if alt.admin {
				continue
			}
			firstShare := true
			if r.ShareID != nil {
				firstShare = checkShare(fail, st, c.Name, key, x, r, shares)
			} else if st.InUse(r.Driver, r.Pool, r.Device) || slices.ContainsFunc(taken, func(y dev) bool { return y.d == x.d }) {
				fail("claim %s: device %s is taken twice", c.Name, key)
			}
			for _, cc := range x.d.ConsumesCounters {
				if !firstShare {
					break
				}
				for name, v := range cc.Counters {
					q := counter(x.pool, cc.CounterSet, name)
					if q.Sub(v.Value); q.Sign() < 0 {
						fail("claim %s: device %s overdraws counter %s/%s", c.Name, key, cc.CounterSet, name)
					}
				}
			}
			if leaf := x.d.SeedInstance; leaf != "" {
				for _, o := range x.pool.Devices {
					if o.Name != x.d.Name && st.InUse(r.Driver, r.Pool, o.Name) && engine.SeedLeavesConflict(leaf, o.SeedInstance) {
						fail("claim %s: seed device %s conflicts with %s in use", c.Name, key, o.Name)
					}
				}
				for _, y := range taken {
					if y.pool == x.pool && engine.SeedLeavesConflict(leaf, y.d.SeedInstance) {
						fail("claim %s: seed devices %s and %s conflict", c.Name, key, y.d.Name)
					}
				}
			}
			taken = append(taken, x)
		}
		bad = append(bad, checkCounts(c, alts, perAlt, node)...)
		for _, con := range c.Spec.Devices.Constraints {
			bad = append(bad, checkConstraint(c.Name, con, perAlt)...)
		}
	}
	return bad
}

// tolerates follows the API: an empty key with Exists tolerates all;
// effects must match when the toleration names one.
func tolerates(tol resourcev1.DeviceToleration, taint resourcev1.DeviceTaint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != taint.Key {
		return false
	}
	if tol.Operator == resourcev1.DeviceTolerationOpExists {
		return true
	}
	return tol.Value == taint.Value
}

// checkCounts: each request is satisfied by exactly one alternative, with
// its count of devices (All: at least one).
func checkCounts(c *resourcev1.ResourceClaim, alts map[string]v1Alt, perAlt map[string][]dev, node *corev1.Node) []string {
	var bad []string
	for _, r := range c.Spec.Devices.Requests {
		names := []string{r.Name}
		if r.Exactly == nil {
			names = nil
			for _, s := range r.FirstAvailable {
				names = append(names, r.Name+"/"+s.Name)
			}
		}
		var got []string
		for _, n := range names {
			if xs, ok := perAlt[n]; ok {
				got = append(got, n)
				if a := alts[n]; !a.all && int64(len(xs)) != a.count {
					bad = append(bad, fmt.Sprintf("claim %s: %s got %d devices on %s, wants %d", c.Name, n, len(xs), node.Name, a.count))
				}
			}
		}
		if len(got) != 1 {
			bad = append(bad, fmt.Sprintf("claim %s: request %s allocated by %v", c.Name, r.Name, got))
		}
	}
	return bad
}

// checkConstraint: matchAttribute values are equal, distinctAttribute
// values differ, over the devices of the requests it names (all when
// none; naming a request covers its subrequests).
func checkConstraint(claim string, con resourcev1.DeviceConstraint, perAlt map[string][]dev) []string {
	fq, match := con.MatchAttribute, true
	if fq == nil {
		fq, match = con.DistinctAttribute, false
	}
	if fq == nil {
		return nil
	}
	var vals []string
	for _, name := range sortedKeys(perAlt) {
		parent, _, _ := strings.Cut(name, "/")
		if len(con.Requests) > 0 && !slices.Contains(con.Requests, name) && !slices.Contains(con.Requests, parent) {
			continue
		}
		for _, x := range perAlt[name] {
			vals = append(vals, x.attr(*fq))
		}
	}
	for i, v := range vals {
		if v == "" {
			return []string{fmt.Sprintf("claim %s: a device lacks attribute %s", claim, *fq)}
		}
		for _, w := range vals[:i] {
			if match && v != w || !match && v == w {
				return []string{fmt.Sprintf("claim %s: constraint on %s violated: %v", claim, *fq, vals)}
			}
		}
	}
	return nil
}

// TestCheckV1ResultCatches: the checker refuses answers that break the
// rules (so that it is not silent by mistake).
func TestCheckV1ResultCatches(t *testing.T) {
	w := &world{}
	d := &datadriven.TestData{Input: `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  pool: {name: node-a, resourceSliceCount: 1}
  nodeName: node-a
  devices:
  - {name: gpu-0, attributes: {numa: {int: 0}}, taints: [{key: k, effect: NoSchedule}]}
  - {name: gpu-1, attributes: {numa: {int: 1}}}
  - {name: gpu-2, attributes: {numa: {int: 1}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old}
spec: {}
status:
  allocation:
    devices:
      results: [{request: r, driver: gpu.example.com, pool: node-a, device: gpu-2}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu, count: 2}
    constraints:
    - {matchAttribute: gpu.example.com/numa}`}
	w.cmdObjects(t, d)
	st := w.v1State(d)
	classes := map[string]*resourcev1.DeviceClass{"gpu": all[*resourcev1.DeviceClass](w)[0]}
	claims := []allocator.V1Claim{{Claim: w.v1Claim(t, d, "c")}}
	result := func(devices ...string) *allocator.V1Result {
		a := &resourcev1.AllocationResult{}
		for _, dv := range devices {
			a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{
				Request: "gpu", Driver: "gpu.example.com", Pool: "node-a", Device: dv})
		}
		return &allocator.V1Result{Fits: true, Allocations: []*resourcev1.AllocationResult{a}}
	}
	for _, tc := range []struct {
		devices []string
		want    string
	}{
		{[]string{"gpu-1"}, "wants 2"},
		{[]string{"gpu-1", "gpu-2"}, "taken twice"},
		{[]string{"gpu-1", "gpu-1"}, "taken twice"},
		{[]string{"gpu-0", "gpu-1"}, "not tolerated"},
		{[]string{"gpu-0", "gpu-1"}, "constraint on gpu.example.com/numa violated"},
		{[]string{"gpu-1", "gpu-9"}, "unknown device"},
	} {
		bad := checkV1Result(st.Inventory(), st, w.node("node-a"), classes, claims, result(tc.devices...))
		if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%v: %q, want a complaint with %q", tc.devices, bad, tc.want)
		}
	}
	if bad := checkV1Result(st.Inventory(), st, w.node("node-b"), classes, claims, result("gpu-1", "gpu-1")); !slices.ContainsFunc(bad, func(s string) bool {
		return strings.Contains(s, "not usable on node node-b")
	}) {
		t.Errorf("a device of another node: %q", bad)
	}
}

// checkShare checks a result with a shareID: the device allows multiple
// allocations and has no allocation that is not a share; the share IDs
// of a device are distinct; consumedCapacity names every capacity of the
// device; the state's shares, the shares taken so far and this one fit
// every capacity. It records the share and reports whether it is the
// device's first (the one that consumes its counters).
func checkShare(fail func(string, ...any), st *allocator.State, claim, key string, x dev, r resourcev1.DeviceRequestAllocationResult,
	shares map[string][]resourcev1.DeviceRequestAllocationResult) bool {
	if !x.d.AllowMultipleAllocations {
		fail("claim %s: device %s has a shareID but does not allow multiple allocations", claim, key)
	}
	n, used := st.Shares(r.Driver, r.Pool, r.Device)
	if n == 0 && st.InUse(r.Driver, r.Pool, r.Device) {
		fail("claim %s: device %s is shared while allocated whole", claim, key)
	}
	for _, o := range shares[key] {
		if *o.ShareID == *r.ShareID {
			fail("claim %s: device %s has share %s twice", claim, key, *r.ShareID)
		}
	}
	for name, dc := range x.d.Capacity {
		q, ok := r.ConsumedCapacity[name]
		if !ok {
			fail("claim %s: share of %s lacks consumedCapacity %s", claim, key, name)
			continue
		}
		sum := q.DeepCopy()
		if u, ok := used[name]; ok {
			sum.Add(u)
		}
		for _, o := range shares[key] {
			sum.Add(o.ConsumedCapacity[name])
		}
		if sum.Cmp(dc.Value) > 0 {
			fail("claim %s: shares of %s consume %s of capacity %s, more than %s", claim, key, sum.String(), name, dc.Value.String())
		}
	}
	first := n == 0 && len(shares[key]) == 0
	shares[key] = append(shares[key], r)
	return first
}
