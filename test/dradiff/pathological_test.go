package dradiff

import (
	"fmt"
	"testing"
	"time"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The inputs that make a backtracking allocator exponential (Kubernetes
// issue 131730): identical devices and requests that cannot all be met,
// so a search that enumerates orders of interchangeable devices tries
// them all before it gives up. Both allocators get the same deadline
// (-dradiff.limit); the benchmark reports each side's time per answer
// and how many attempts hit the deadline.

const pathoDriver = "patho.example.com"

// pathoCase is one node with n devices in one pool. Every device has the
// attribute "group" (groupOf(i)) and the capacity "mem".
func pathoCase(n int, groupOf func(int) string) *Case {
	node := &k8scorev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", UID: "uid-node-0", Labels: map[string]string{"kubernetes.io/hostname": "node-0"}}}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "patho-node-0", UID: "uid-slice"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   pathoDriver,
			Pool:     resourcev1.ResourcePool{Name: "node-0", ResourceSliceCount: 1},
			NodeName: ptr.To("node-0"),
		},
	}
	for i := 0; i < n; i++ {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("dev-%02d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"group": {StringValue: ptr.To(groupOf(i))},
				"index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"mem": {Value: resource.MustParse("16Gi")},
			},
		})
	}
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "patho", UID: "uid-class"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", pathoDriver)}}}},
	}
	return &Case{Nodes: []*k8scorev1.Node{node}, Classes: []*resourcev1.DeviceClass{class}, Slices: []*resourcev1.ResourceSlice{slice}}
}

func pathoRequest(name string, count int64, expr string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "patho", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}
	if expr != "" {
		r.Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	return r
}

func pathoClaim(name string, reqs []resourcev1.DeviceRequest, cons []resourcev1.DeviceConstraint) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs, Constraints: cons}},
	}
}

// pathoCases are the inputs. None of them fits: the answer is "no", and
// the question is how long each allocator takes to give it.
func pathoCases() map[string]*Case {
	same := func(int) string { return "a" }
	out := map[string]*Case{}

	// One more than fit: n identical devices, two requests of n/2 and
	// n/2+1. The sizes show the growth.
	for _, n := range []int{8, 10, 12, 16} {
		c := pathoCase(n, same)
		c.Claims = []*resourcev1.ResourceClaim{pathoClaim("more", []resourcev1.DeviceRequest{
			pathoRequest("a", int64(n/2), ""), pathoRequest("b", int64(n/2+1), "")}, nil)}
		out[fmt.Sprintf("one-more-than-fit/%d-devices", n)] = c
	}

	// One more than fit over single-device requests: 12 identical devices,
	// 13 requests of one each, in one claim.
	c := pathoCase(12, same)
	var reqs []resourcev1.DeviceRequest
	for i := 0; i < 13; i++ {
		reqs = append(reqs, pathoRequest(fmt.Sprintf("r%d", i), 1, ""))
	}
	c.Claims = []*resourcev1.ResourceClaim{pathoClaim("singles", reqs, nil)}
	out["one-more-than-fit/13-single-requests"] = c

	// A constraint that fails only at the last device: 16 devices, 15 in
	// group "a" and the last in group "b"; request "many" takes 8 of any
	// device, request "last" only the last device, and matchAttribute
	// group over both. Every choice for "many" is consistent until "last".
	c = pathoCase(16, func(i int) string {
		if i == 15 {
			return "b"
		}
		return "a"
	})
	c.Claims = []*resourcev1.ResourceClaim{pathoClaim("last", []resourcev1.DeviceRequest{
		pathoRequest("many", 8, ""),
		pathoRequest("last", 1, fmt.Sprintf("device.attributes[%q].index == 15", pathoDriver)),
	}, []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(pathoDriver + "/group"))}})}
	out["constraint-fails-at-last-device/16-devices"] = c
	return out
}

// TestPathologicalCasesAreNoFit pins what the benchmark measures: allot
// answers "no fit" for every pathological input (within the deadline),
// so the benchmark times a complete answer, not an error.
func TestPathologicalCasesAreNoFit(t *testing.T) {
	for name, c := range pathoCases() {
		o := runAllot(c, c.Nodes[0], *flagLimit)
		if o.kind != noFit {
			t.Errorf("%s: allot's outcome is %v (err %v), want no fit", name, o.kind, o.err)
		}
	}
}

// BenchmarkPathological times allot's and Kubernetes' allocators on the
// inputs of issue 131730. Each side has -dradiff.limit per attempt; the
// metric "timeouts" counts attempts that hit it (their time is the limit).
func BenchmarkPathological(b *testing.B) {
	for name, c := range pathoCases() {
		for _, side := range []string{"allot", "kubernetes"} {
			b.Run(name+"/"+side, func(b *testing.B) {
				timeouts := 0
				var total time.Duration
				for i := 0; i < b.N; i++ {
					var kind outcomeKind
					var dur time.Duration
					if side == "allot" {
						o := runAllot(c, c.Nodes[0], *flagLimit)
						kind, dur = o.kind, o.dur
					} else {
						o := runUpstream(c, c.Claims, c.Nodes[0], *flagLimit)
						kind, dur = o.kind, o.dur
					}
					switch kind {
					case timeout:
						timeouts++
					case fit:
						b.Fatalf("%s fits on %s, want no fit", name, side)
					}
					total += dur
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/answer")
				b.ReportMetric(float64(timeouts), "timeouts")
			})
		}
	}
}
