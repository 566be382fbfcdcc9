package allocator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// Builders for the v1 allocation tests (prefixed v1t).

const (
	v1tGPU = "gpu.example.com"
	v1tNIC = "nic.example.com"
)

type v1tOpt func(*resourcev1.Device)

func v1tStr(name, v string) v1tOpt {
	return func(d *resourcev1.Device) { v1tSet(d, name, resourcev1.DeviceAttribute{StringValue: &v}) }
}

func v1tInt(name string, v int64) v1tOpt {
	return func(d *resourcev1.Device) { v1tSet(d, name, resourcev1.DeviceAttribute{IntValue: &v}) }
}

func v1tSet(d *resourcev1.Device, name string, a resourcev1.DeviceAttribute) {
	if d.Attributes == nil {
		d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
	}
	d.Attributes[resourcev1.QualifiedName(name)] = a
}

func v1tCap(name, q string) v1tOpt {
	return func(d *resourcev1.Device) {
		if d.Capacity == nil {
			d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
		}
		d.Capacity[resourcev1.QualifiedName(name)] = resourcev1.DeviceCapacity{Value: resource.MustParse(q)}
	}
}

func v1tTaint(key, value string, effect resourcev1.DeviceTaintEffect) v1tOpt {
	return func(d *resourcev1.Device) {
		d.Taints = append(d.Taints, resourcev1.DeviceTaint{Key: key, Value: value, Effect: effect})
	}
}

// v1tConsumes: counters as name=quantity.
func v1tConsumes(set string, counters ...string) v1tOpt {
	return func(d *resourcev1.Device) {
		c := resourcev1.DeviceCounterConsumption{CounterSet: set, Counters: map[string]resourcev1.Counter{}}
		for _, kv := range counters {
			k, v, _ := strings.Cut(kv, "=")
			c.Counters[k] = resourcev1.Counter{Value: resource.MustParse(v)}
		}
		d.ConsumesCounters = append(d.ConsumesCounters, c)
	}
}

func v1tDev(name string, opts ...v1tOpt) resourcev1.Device {
	d := resourcev1.Device{Name: name}
	for _, o := range opts {
		o(&d)
	}
	return d
}

// v1tGPUs is n GPUs gpu-0... with a model attribute.
func v1tGPUs(n int, model string) []resourcev1.Device {
	var out []resourcev1.Device
	for i := range n {
		out = append(out, v1tDev(fmt.Sprintf("gpu-%d", i), v1tStr("model", model), v1tCap("memory", "40Gi")))
	}
	return out
}

// v1tSlice is a one-slice pool local to node, or on all nodes when node
// is "".
func v1tSlice(name, driver, pool, node string, devs ...resourcev1.Device) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			Devices: devs}}
	if node != "" {
		s.Spec.NodeName = &node
	} else {
		t := true
		s.Spec.AllNodes = &t
	}
	return s
}

// v1tCounterSlice is the slice of a pool's shared counters (name=quantity).
func v1tCounterSlice(name, driver, pool, node, set string, counters ...string) *resourcev1.ResourceSlice {
	s := v1tSlice(name, driver, pool, node)
	cs := resourcev1.CounterSet{Name: set, Counters: map[string]resourcev1.Counter{}}
	for _, kv := range counters {
		k, v, _ := strings.Cut(kv, "=")
		cs.Counters[k] = resourcev1.Counter{Value: resource.MustParse(v)}
	}
	s.Spec.SharedCounters = []resourcev1.CounterSet{cs}
	return s
}

func v1tSliceCount(n int64, ss ...*resourcev1.ResourceSlice) []*resourcev1.ResourceSlice {
	for _, s := range ss {
		s.Spec.Pool.ResourceSliceCount = n
	}
	return ss
}

func v1tClass(name string, sels ...string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, s := range sels {
		c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	return c
}

// v1tClasses: gpu and nic select their driver, any selects everything,
// seed selects the seed driver "gpu".
func v1tClasses() []*resourcev1.DeviceClass {
	return []*resourcev1.DeviceClass{
		v1tClass("gpu", `device.driver == "gpu.example.com"`),
		v1tClass("nic", `device.driver == "nic.example.com"`),
		v1tClass("any"),
		v1tClass("seed", `device.driver == "gpu"`),
	}
}

func v1tSels(sels []string) []resourcev1.DeviceSelector {
	var out []resourcev1.DeviceSelector
	for _, s := range sels {
		out = append(out, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	return out
}

func v1tExact(name, class string, count int64, sels ...string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count, Selectors: v1tSels(sels)}}
}

func v1tAll(name, class string, sels ...string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourcev1.DeviceAllocationModeAll, Selectors: v1tSels(sels)}}
}

func v1tAdmin(r resourcev1.DeviceRequest) resourcev1.DeviceRequest {
	t := true
	r.Exactly.AdminAccess = &t
	return r
}

func v1tTolerate(r resourcev1.DeviceRequest, tols ...resourcev1.DeviceToleration) resourcev1.DeviceRequest {
	r.Exactly.Tolerations = tols
	return r
}

func v1tFirst(name string, subs ...resourcev1.DeviceSubRequest) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, FirstAvailable: subs}
}

func v1tSub(name, class string, count int64, sels ...string) resourcev1.DeviceSubRequest {
	return resourcev1.DeviceSubRequest{Name: name, DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount,
		Count: count, Selectors: v1tSels(sels)}
}

func v1tMatch(attr string, reqs ...string) resourcev1.DeviceConstraint {
	a := resourcev1.FullyQualifiedName(attr)
	return resourcev1.DeviceConstraint{MatchAttribute: &a, Requests: reqs}
}

func v1tDistinct(attr string, reqs ...string) resourcev1.DeviceConstraint {
	a := resourcev1.FullyQualifiedName(attr)
	return resourcev1.DeviceConstraint{DistinctAttribute: &a, Requests: reqs}
}

func v1tClaim(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}}
}

func v1tConstrain(c *resourcev1.ResourceClaim, cons ...resourcev1.DeviceConstraint) *resourcev1.ResourceClaim {
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, cons...)
	return c
}

// v1tAllocated is a claim allocated to devices "driver/pool/device", on
// node (nil selector when node is "").
func v1tAllocated(name, node string, devs ...string) *resourcev1.ResourceClaim {
	c := v1tClaim(name)
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devs {
		parts := strings.SplitN(d, "/", 3)
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: parts[0], Pool: parts[1], Device: parts[2]})
	}
	if node != "" {
		c.Status.Allocation.NodeSelector = &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
			MatchFields: []k8scorev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{node}}}}}}
	}
	return c
}

func v1tNode(name string, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		n.Labels[k] = v
	}
	return n
}

func v1tClassFunc(classes []*resourcev1.DeviceClass) func(string) *resourcev1.DeviceClass {
	return func(name string) *resourcev1.DeviceClass {
		for _, c := range classes {
			if c.Name == name {
				return c
			}
		}
		return nil
	}
}

// v1tAllocate allocates claims (pending or not) on the node and fails the
// test on an error.
func v1tAllocate(t testing.TB, st *State, node *corev1.Node, classes []*resourcev1.DeviceClass, claims ...V1Claim) *V1Result {
	t.Helper()
	if classes == nil {
		classes = v1tClasses()
	}
	req := PrepareV1(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "default", UID: "pod-uid"}}, claims, v1tClassFunc(classes))
	res, err := AllocateV1(context.Background(), req, st, node)
	if err != nil {
		t.Fatalf("AllocateV1: %v", err)
	}
	if res.Fits {
		v1tCheckValid(t, st, node, req, res)
	}
	return res
}

func v1tClaims(cs ...*resourcev1.ResourceClaim) []V1Claim {
	out := make([]V1Claim, len(cs))
	for i, c := range cs {
		out[i] = V1Claim{Claim: c}
	}
	return out
}

// v1tDevices lists a result's devices as "request=pool/device", per claim.
func v1tDevices(res *V1Result) [][]string {
	var out [][]string
	for _, a := range res.Allocations {
		if a == nil {
			out = append(out, nil)
			continue
		}
		var ds []string
		for _, r := range a.Devices.Results {
			ds = append(ds, r.Request+"="+r.Pool+"/"+r.Device)
		}
		if ds == nil {
			ds = []string{}
		}
		out = append(out, ds)
	}
	return out
}

// v1tWithResults returns the claims with the result's allocations.
func v1tWithResults(res *V1Result, claims ...*resourcev1.ResourceClaim) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for i, c := range claims {
		if res.Allocations[i] == nil {
			continue
		}
		c = c.DeepCopy()
		c.Status.Allocation = res.Allocations[i]
		out = append(out, c)
	}
	return out
}

// v1tCheckValid checks a fitting result from the devices alone, without
// the search: every device exists, is available on the node, usable and
// matches the selectors of its request, its taints are tolerated; no
// device twice in a claim nor (without admin access) twice in the pod or
// already in use; counters fit; seed partitions do not conflict;
// constraints hold; counts and All are right; the node selector matches
// the node.
func v1tCheckValid(t testing.TB, st *State, node *corev1.Node, req *V1Request, res *V1Result) {
	t.Helper()
	inv := st.Inventory()
	if len(res.Allocations) != len(req.claims) {
		t.Fatalf("%d allocations for %d claims", len(res.Allocations), len(req.claims))
	}
	taken := map[int32]bool{}
	left := map[int32]int64{}
	var seedTaken []int32
	for ci, a := range res.Allocations {
		if !req.Pending[ci] {
			if a != nil {
				t.Errorf("claim %s was allocated already, got a new allocation", req.Keys[ci])
			}
			continue
		}
		if a == nil {
			t.Fatalf("claim %s has no allocation", req.Keys[ci])
		}
		if sel := a.NodeSelector; sel != nil {
			conv, _ := invConvertNodeSelector(sel)
			if !conv.Matches(node.Name, node.Labels) {
				t.Errorf("claim %s: node selector %v does not match node %s", req.Keys[ci], sel, node.Name)
			}
		}
		inClaim := map[int32]bool{}
		perAlt := map[string][]int32{}
		for _, r := range a.Devices.Results {
			x, ok := inv.Lookup(r.Driver, r.Pool, r.Device)
			if !ok {
				t.Fatalf("claim %s: unknown device %s/%s/%s", req.Keys[ci], r.Driver, r.Pool, r.Device)
			}
			pool, d := inv.At(x)
			if !pool.Usable() || !DeviceAvailableOn(d, node) {
				t.Errorf("claim %s: device %s/%s/%s not usable on node %s", req.Keys[ci], pool.Driver, pool.Name, d.Name, node.Name)
			}
			if inClaim[x] {
				t.Errorf("claim %s: device %s twice", req.Keys[ci], r.Device)
			}
			inClaim[x] = true
			alt := v1tFindAlt(req.Reqs[ci], r.Request)
			if alt == nil {
				t.Fatalf("claim %s: result for unknown request %s", req.Keys[ci], r.Request)
			}
			perAlt[r.Request] = append(perAlt[r.Request], x)
			for _, expr := range slices.Concat(alt.ClassSel, alt.Sel) {
				if ok, err := engine.MatchDeviceSelector(expr, v1tInput(pool, d)); !ok || err != nil {
					t.Errorf("claim %s: device %s does not match %s (%v)", req.Keys[ci], r.Device, expr, err)
				}
			}
			if tt := engine.Untolerated(d.Taints, alt.Tolerations); tt != nil {
				t.Errorf("claim %s: device %s has taint %v not tolerated", req.Keys[ci], r.Device, tt)
			}
			if (r.AdminAccess != nil && *r.AdminAccess) != alt.Admin {
				t.Errorf("claim %s: device %s adminAccess %v", req.Keys[ci], r.Device, r.AdminAccess)
			}
			if alt.Admin {
				continue
			}
			if taken[x] || st.InUse(pool.Driver, pool.Name, d.Name) {
				t.Errorf("claim %s: device %s is taken twice", req.Keys[ci], r.Device)
			}
			taken[x] = true
			for _, u := range inv.Uses(x) {
				if _, ok := left[u.Counter]; !ok {
					left[u.Counter] = st.CounterLeft(u.Counter)
				}
				left[u.Counter] -= u.Amount
				if left[u.Counter] < 0 {
					t.Errorf("claim %s: device %s overdraws counter %s/%s", req.Keys[ci], r.Device, inv.Counters()[u.Counter].Set, inv.Counters()[u.Counter].Name)
				}
			}
			if in := d.SeedInstance; in != "" {
				if st.SchemeLocked(pool.Driver, pool.Name, in) {
					t.Errorf("claim %s: seed device %s conflicts with a leaf in use", req.Keys[ci], r.Device)
				}
				for _, y := range seedTaken {
					opool, o := inv.At(y)
					if opool == pool && engine.SeedLeavesConflict(in, o.SeedInstance) {
						t.Errorf("claim %s: seed devices %s and %s conflict", req.Keys[ci], r.Device, o.Name)
					}
				}
				seedTaken = append(seedTaken, x)
			}
		}
		// Counts, one alternative per request.
		for _, q := range req.Reqs[ci] {
			var got []string
			for _, alt := range q.Alts {
				if xs, ok := perAlt[alt.Name]; ok {
					got = append(got, alt.Name)
					if !alt.All && len(xs) != alt.Count {
						t.Errorf("claim %s: %s got %d devices, wants %d", req.Keys[ci], alt.Name, len(xs), alt.Count)
					}
				}
			}
			if len(got) != 1 {
				t.Errorf("claim %s: request %s allocated by %v", req.Keys[ci], q.Name, got)
			}
		}
		// Constraints.
		for _, c := range req.Cons[ci] {
			var vals []string
			for _, q := range req.Reqs[ci] {
				for _, alt := range q.Alts {
					if !c.Applies(q.Name, &alt) {
						continue
					}
					for _, x := range perAlt[alt.Name] {
						vals = append(vals, inv.ConstraintValue(x, c.Attr))
					}
				}
			}
			for i, v := range vals {
				if v == "" {
					t.Errorf("claim %s: %s: a device lacks the attribute", req.Keys[ci], c.Clause)
				}
				for _, w := range vals[:i] {
					if c.Match && v != w || !c.Match && v == w {
						t.Errorf("claim %s: %s violated: %v", req.Keys[ci], c.Clause, vals)
					}
				}
			}
		}
	}
}

// v1tInput is the device as selectors see it.
func v1tInput(pool *engine.Pool, d *engine.Device) engine.DeviceSelectorInput {
	return engine.DeviceSelectorInput{Driver: pool.Driver, Attributes: d.Attributes, Capacity: d.Capacity, AllowMultipleAllocations: d.AllowMultipleAllocations}
}

func v1tFindAlt(reqs []engine.Req, name string) *engine.Alt {
	for i := range reqs {
		for j := range reqs[i].Alts {
			if reqs[i].Alts[j].Name == name {
				return &reqs[i].Alts[j]
			}
		}
	}
	return nil
}

// v1tSeedNode is a seed NodeResourceSlice of driver "gpu" with n GPUs
// usable whole (32Gi), as halves (16Gi) or as quarters (8Gi).
func v1tSeedNode(node string, n int) *resourceapi.NodeResourceSlice {
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		p.ResourceInstances = append(p.ResourceInstances, gpuInstance(fmt.Sprintf("gpu-%d", i)))
	}
	return makeSlice(node, "gpu", p)
}
