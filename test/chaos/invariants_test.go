package chaos

import (
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The checks find what they are for: each is shown a cluster state that
// breaks its rule, and one that does not.

func allocated(name, node string, ids ...string) resourcev1alpha2.ResourceClaim {
	c := resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: name}}
	var in []resourcev1alpha2.AllocatedResourceInstance
	for _, id := range ids {
		in = append(in, resourcev1alpha2.AllocatedResourceInstance{ID: id})
	}
	c.Status.Allocation = &resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{
		DriverName: "gpu.example.com",
		StructuredData: &resourcev1alpha2.StructuredResourceHandle{NodeName: node,
			Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: in}},
	}}}
	return c
}

func TestCheckNoDoubleAllocation(t *testing.T) {
	for name, tc := range map[string]struct {
		claims []resourcev1alpha2.ResourceClaim
		want   int
	}{
		"distinct":               {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-0"), allocated("b", "n1", "gpu-1")}},
		"other node":             {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-0"), allocated("b", "n2", "gpu-0")}},
		"siblings in one group":  {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-1/halves/half-0"), allocated("b", "n1", "gpu-1/halves/half-1")}},
		"one claim, two halves":  {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-1/halves/half-0", "gpu-1/halves/half-1")}},
		"same instance":          {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-0"), allocated("b", "n1", "gpu-0")}, want: 1},
		"instance and ancestor":  {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-1"), allocated("b", "n1", "gpu-1/halves/half-0")}, want: 1},
		"two groups of one":      {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-1/halves/half-0"), allocated("b", "n1", "gpu-1/quarters/q-3")}, want: 1},
		"deep ancestor":          {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-1/halves/half-0/q/q-1"), allocated("b", "n1", "gpu-1/halves/half-0")}, want: 1},
		"three on one":           {claims: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-0"), allocated("b", "n1", "gpu-0"), allocated("c", "n1", "gpu-0")}, want: 3},
		"unallocated is nothing": {claims: []resourcev1alpha2.ResourceClaim{{}, allocated("b", "n1", "gpu-0")}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := CheckNoDoubleAllocation(Claims{V1alpha2: tc.claims}); len(got) != tc.want {
				t.Fatalf("got %v, want %d violations", got, tc.want)
			}
		})
	}
}

func runningPod(name string, uid types.UID, claims ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: name, UID: uid}}
	p.Status.Phase = corev1.PodRunning
	for _, c := range claims {
		tmpl := "t"
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &tmpl})
		if c != "" {
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: &c})
		}
	}
	return p
}

func reserved(c resourcev1alpha2.ResourceClaim, uid types.UID) resourcev1alpha2.ResourceClaim {
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", UID: uid})
	return c
}

func TestCheckRunningPodsReserved(t *testing.T) {
	ok := reserved(allocated("c1", "n1", "gpu-0"), "p1")
	for name, tc := range map[string]struct {
		pods   []corev1.Pod
		claims []resourcev1alpha2.ResourceClaim
		want   string
	}{
		"reserved":      {pods: []corev1.Pod{runningPod("p", "p1", "c1")}, claims: []resourcev1alpha2.ResourceClaim{ok}},
		"no claims":     {pods: []corev1.Pod{runningPod("p", "p1")}},
		"not recorded":  {pods: []corev1.Pod{runningPod("p", "p1", "")}, want: "0 of its 1 claims"},
		"missing":       {pods: []corev1.Pod{runningPod("p", "p1", "c9")}, claims: []resourcev1alpha2.ResourceClaim{ok}, want: "does not exist"},
		"unallocated":   {pods: []corev1.Pod{runningPod("p", "p1", "c1")}, claims: []resourcev1alpha2.ResourceClaim{{ObjectMeta: ok.ObjectMeta}}, want: "not allocated"},
		"reserved else": {pods: []corev1.Pod{runningPod("p", "p2", "c1")}, claims: []resourcev1alpha2.ResourceClaim{ok}, want: "not reserved"},
	} {
		t.Run(name, func(t *testing.T) {
			got := CheckRunningPodsReserved(tc.pods, Claims{V1alpha2: tc.claims})
			if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Detail, tc.want)) {
				t.Fatalf("got %v, want %q", got, tc.want)
			}
		})
	}
}

func generated(name string, pod types.UID) resourcev1alpha2.ResourceClaim {
	yes := true
	return resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: name,
		Annotations:     map[string]string{resourcev1alpha2.PodClaimNameAnnotation: "gpu"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod, Controller: &yes}}}}
}

func TestCheckSettledClaims(t *testing.T) {
	pod := runningPod("p", "p1", "c1")
	for name, tc := range map[string]struct {
		pods   []corev1.Pod
		claims []resourcev1alpha2.ResourceClaim
		want   []string
	}{
		"in use":           {pods: []corev1.Pod{pod}, claims: []resourcev1alpha2.ResourceClaim{reserved(allocated("c1", "n1", "gpu-0"), "p1")}},
		"generated, owned": {pods: []corev1.Pod{pod}, claims: []resourcev1alpha2.ResourceClaim{generated("c1", "p1")}},
		"unused":           {claims: []resourcev1alpha2.ResourceClaim{allocated("c1", "n1", "gpu-0")}, want: []string{RuleUnusedAllocation}},
		"orphan":           {claims: []resourcev1alpha2.ResourceClaim{generated("c1", "gone")}, want: []string{RuleOrphanClaim}},
		"two for an entry": {pods: []corev1.Pod{pod}, claims: []resourcev1alpha2.ResourceClaim{generated("c1", "p1"), generated("c2", "p1")}, want: []string{RuleOrphanClaim}},
	} {
		t.Run(name, func(t *testing.T) {
			got := CheckSettledClaims(tc.pods, Claims{V1alpha2: tc.claims})
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i, v := range got {
				if v.Rule != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestCheckNoPodLost(t *testing.T) {
	created := map[types.UID]string{"1": "a", "2": "b", "3": "c"}
	listed := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "99"}}}
	got := CheckNoPodLost(created, map[types.UID]bool{"2": true}, listed)
	if len(got) != 1 || !strings.Contains(got[0].Detail, "pod c (uid 3)") {
		t.Fatalf("got %v, want pod c lost (a new pod has its name)", got)
	}
}

func TestCheckDriverState(t *testing.T) {
	state := "prepare u1 chaos/a\nunprepare u1 chaos/a\nprepare u2 chaos/b\nunprepare u3 chaos/c\nprepare u4 chaos/d\nprepare u4 chaos/d\nunprepare u4 chaos/d\n"
	got := CheckDriverState("n1", state, nil)
	if len(got) != 2 || !strings.Contains(got[0].Detail, "u2 (chaos/b) prepared 1 more") || !strings.Contains(got[1].Detail, "u4") {
		t.Fatalf("got %v, want u2 and u4 unbalanced", got)
	}
}

// v1Allocated is a resource.k8s.io/v1 claim allocated the seed devices
// (instance IDs, written as v1 device names) of node's pool.
func v1Allocated(name, node string, ids ...string) resourcev1.ResourceClaim {
	c := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: name}}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, id := range ids {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpu", Driver: "gpu.example.com", Pool: node, Device: strings.ReplaceAll(id, "/", "--")})
	}
	return c
}

func v1Reserved(c resourcev1.ResourceClaim, uid types.UID) resourcev1.ResourceClaim {
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", UID: uid})
	return c
}

// view and v1View mark a claim as a view of one stored in the other
// version.
func view(c resourcev1alpha2.ResourceClaim) resourcev1alpha2.ResourceClaim {
	c.Annotations = map[string]string{resourcev1alpha2.StoredVersionAnnotation: "resource.k8s.io/v1"}
	return c
}

func v1View(c resourcev1.ResourceClaim) resourcev1.ResourceClaim {
	c.Annotations = map[string]string{resourcev1alpha2.StoredVersionAnnotation: "resource.k8s.io/v1alpha2"}
	return c
}

func TestCheckNoDoubleAllocationAcrossVersions(t *testing.T) {
	type (
		a2 = []resourcev1alpha2.ResourceClaim
		v1 = []resourcev1.ResourceClaim
	)
	for name, tc := range map[string]struct {
		claims Claims
		want   int
	}{
		"same seed instance":       {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-0")}, V1: v1{v1Allocated("b", "n1", "gpu-0")}}, want: 1},
		"different instances":      {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-0")}, V1: v1{v1Allocated("b", "n1", "gpu-1")}}},
		"same instance, two nodes": {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-0")}, V1: v1{v1Allocated("b", "n2", "gpu-0")}}},
		"sibling halves":           {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-1/halves/half-0")}, V1: v1{v1Allocated("b", "n1", "gpu-1/halves/half-1")}}},
		"same half":                {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-1/halves/half-0")}, V1: v1{v1Allocated("b", "n1", "gpu-1/halves/half-0")}}, want: 1},
		"v1 whole, v1alpha2 half":  {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-1/halves/half-1")}, V1: v1{v1Allocated("b", "n1", "gpu-1")}}, want: 1},
		"v1 half, v1alpha2 whole":  {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-1")}, V1: v1{v1Allocated("b", "n1", "gpu-1/halves/half-0")}}, want: 1},
		"two groups across":        {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-1/halves/half-0")}, V1: v1{v1Allocated("b", "n1", "gpu-1/quarters/q-3")}}, want: 1},
		"two v1 claims":            {claims: Claims{V1: v1{v1Allocated("a", "n1", "gpu-0"), v1Allocated("b", "n1", "gpu-0")}}, want: 1},
		"one v1 claim, two halves": {claims: Claims{V1: v1{v1Allocated("a", "n1", "gpu-1/halves/half-0", "gpu-1/halves/half-1")}}},
		// A List through one version returns views of the other's
		// claims: a view is the same claim, not a second holder.
		"views ignored": {claims: Claims{V1alpha2: a2{allocated("a", "n1", "gpu-0"), view(allocated("b", "n1", "gpu-0"))},
			V1: v1{v1Allocated("b", "n1", "gpu-0"), v1View(v1Allocated("a", "n1", "gpu-0"))}}, want: 1},
		"view only": {claims: Claims{V1alpha2: a2{view(allocated("b", "n1", "gpu-0"))}, V1: v1{v1Allocated("b", "n1", "gpu-0")}}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := CheckNoDoubleAllocation(tc.claims); len(got) != tc.want {
				t.Fatalf("got %v, want %d violations", got, tc.want)
			}
		})
	}
	got := CheckNoDoubleAllocation(Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-1")},
		V1: []resourcev1.ResourceClaim{v1Allocated("b", "n1", "gpu-1/halves/half-0")}})
	if len(got) != 1 || got[0].Detail != "node n1 driver gpu.example.com: chaos/a holds gpu-1, chaos/b (v1) holds gpu-1/halves/half-0" {
		t.Fatalf("got %v", got)
	}
}

func TestStoredClaims(t *testing.T) {
	cs := StoredClaims([]resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-0"), view(allocated("b", "n1", "gpu-1"))},
		[]resourcev1.ResourceClaim{v1View(v1Allocated("a", "n1", "gpu-0")), v1Allocated("b", "n1", "gpu-1")})
	if len(cs.V1alpha2) != 1 || cs.V1alpha2[0].Name != "a" || len(cs.V1) != 1 || cs.V1[0].Name != "b" || cs.Len() != 2 {
		t.Fatalf("got %+v, want v1alpha2 a and v1 b", cs)
	}
}

func TestCheckRunningPodsReservedV1(t *testing.T) {
	ok := v1Reserved(v1Allocated("c1", "n1", "gpu-0"), "p1")
	pod := runningPod("p", "p1", "c1")
	for name, tc := range map[string]struct {
		pods   []corev1.Pod
		claims Claims
		want   string
	}{
		"reserved":      {pods: []corev1.Pod{pod}, claims: Claims{V1: []resourcev1.ResourceClaim{ok}}},
		"missing":       {pods: []corev1.Pod{pod}, claims: Claims{V1: []resourcev1.ResourceClaim{v1View(ok)}}, want: "does not exist"},
		"unallocated":   {pods: []corev1.Pod{pod}, claims: Claims{V1: []resourcev1.ResourceClaim{{ObjectMeta: ok.ObjectMeta}}}, want: "v1 claim c1 is not allocated"},
		"reserved else": {pods: []corev1.Pod{runningPod("p", "p2", "c1")}, claims: Claims{V1: []resourcev1.ResourceClaim{ok}}, want: "v1 claim c1 is not reserved"},
	} {
		t.Run(name, func(t *testing.T) {
			got := CheckRunningPodsReserved(tc.pods, tc.claims)
			if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Detail, tc.want)) {
				t.Fatalf("got %v, want %q", got, tc.want)
			}
		})
	}
}

func v1Generated(name string, pod types.UID) resourcev1.ResourceClaim {
	c := generated(name, pod)
	return resourcev1.ResourceClaim{ObjectMeta: c.ObjectMeta}
}

func protected(c resourcev1.ResourceClaim) resourcev1.ResourceClaim {
	c.Finalizers = append(c.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer)
	return c
}

func TestCheckSettledClaimsV1(t *testing.T) {
	pod := runningPod("p", "p1", "c1")
	type v1 = []resourcev1.ResourceClaim
	for name, tc := range map[string]struct {
		pods   []corev1.Pod
		claims Claims
		want   []string
	}{
		"in use":              {pods: []corev1.Pod{pod}, claims: Claims{V1: v1{protected(v1Reserved(v1Allocated("c1", "n1", "gpu-0"), "p1"))}}},
		"generated, owned":    {pods: []corev1.Pod{pod}, claims: Claims{V1: v1{v1Generated("c1", "p1")}}},
		"unused":              {claims: Claims{V1: v1{v1Allocated("c1", "n1", "gpu-0")}}, want: []string{RuleUnusedAllocation}},
		"finalizer left":      {claims: Claims{V1: v1{protected(resourcev1.ResourceClaim{})}}, want: []string{RuleFinalizerLeft}},
		"v1alpha2 finalizer":  {claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{resourcev1alpha2.DeleteProtectionFinalizer}}}}}, want: []string{RuleFinalizerLeft}},
		"orphan":              {claims: Claims{V1: v1{v1Generated("c1", "gone")}}, want: []string{RuleOrphanClaim}},
		"two across versions": {pods: []corev1.Pod{pod}, claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{generated("c1", "p1")}, V1: v1{v1Generated("c2", "p1")}}, want: []string{RuleOrphanClaim}},
		"a view is no second": {pods: []corev1.Pod{pod}, claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{view(generated("c1", "p1"))}, V1: v1{v1Generated("c1", "p1")}}},
	} {
		t.Run(name, func(t *testing.T) {
			got := CheckSettledClaims(tc.pods, tc.claims)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i, v := range got {
				if v.Rule != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestCheckDriverStateV1(t *testing.T) {
	state := "prepare u1 chaos/a\nunprepare u1 chaos/a\nprepare v1 chaos/b\nprepare u2 chaos/c\n"
	got := CheckDriverState("n1", state, map[types.UID]string{"u1": versionV1alpha2, "v1": versionV1, "u2": versionV1alpha2})
	if len(got) != 2 || !strings.Contains(got[0].Detail, "claim u2 (chaos/c)") || !strings.Contains(got[1].Detail, "v1 claim v1 (chaos/b)") {
		t.Fatalf("got %v, want u2 and the v1 claim v1 unbalanced", got)
	}
	prepared := PreparedUIDs(state)
	if len(prepared) != 3 || !prepared["v1"] {
		t.Fatalf("prepared %v", prepared)
	}
	if got := CheckPreparedVersions(map[types.UID]string{"u1": versionV1alpha2, "v1": versionV1, "x": versionV1}, prepared); len(got) != 0 {
		t.Fatalf("got %v, want none", got)
	}
	got = CheckPreparedVersions(map[types.UID]string{"u1": versionV1alpha2, "x": versionV1, "y": versionV1}, prepared)
	if len(got) != 1 || got[0].Rule != RuleNeverPrepared || !strings.Contains(got[0].Detail, "2 v1 claims") {
		t.Fatalf("got %v, want the v1 claims never prepared", got)
	}
}

// upstreamAllocated is a v1 claim allocated devices of the upstream
// driver (test/upstreamdriver: gpu-0, gpu-1, ... in the pool named after
// its node).
func upstreamAllocated(name, node string, devices ...string) resourcev1.ResourceClaim {
	c := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpu", Driver: upstreamDriver, Pool: node, Device: d})
	}
	return c
}

func TestCheckNoDoubleAllocationUpstream(t *testing.T) {
	type v1 = []resourcev1.ResourceClaim
	for name, tc := range map[string]struct {
		claims Claims
		want   int
	}{
		"distinct devices":      {claims: Claims{V1: v1{upstreamAllocated("a", "up", "gpu-0"), upstreamAllocated("b", "up", "gpu-1")}}},
		"same device":           {claims: Claims{V1: v1{upstreamAllocated("a", "up", "gpu-0"), upstreamAllocated("b", "up", "gpu-0")}}, want: 1},
		"same device, two pool": {claims: Claims{V1: v1{upstreamAllocated("a", "up", "gpu-0"), upstreamAllocated("b", "up-2", "gpu-0")}}},
		"one claim, two":        {claims: Claims{V1: v1{upstreamAllocated("a", "up", "gpu-0", "gpu-1")}}},
		// gpu-1 is not an ancestor of gpu-10.
		"prefix is no ancestor": {claims: Claims{V1: v1{upstreamAllocated("a", "up", "gpu-1"), upstreamAllocated("b", "up", "gpu-10")}}},
		// The same names of another driver in a pool of the same name
		// are other devices.
		"other driver": {claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{allocated("a", "up", "gpu-0")},
			V1: v1{upstreamAllocated("b", "up", "gpu-0"), v1Allocated("c", "up", "gpu-1")}}},
		"a view is the same claim": {claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{view(allocated("a", "up", "gpu-0"))},
			V1: v1{upstreamAllocated("a", "up", "gpu-0")}}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := CheckNoDoubleAllocation(tc.claims); len(got) != tc.want {
				t.Fatalf("got %v, want %d violations", got, tc.want)
			}
		})
	}
	got := CheckNoDoubleAllocation(Claims{V1: []resourcev1.ResourceClaim{upstreamAllocated("a", "up", "gpu-2"), upstreamAllocated("b", "up", "gpu-2")}})
	if len(got) != 1 || got[0].Detail != "node up driver upstream.example.com: chaos/a (v1) holds gpu-2, chaos/b (v1) holds gpu-2" {
		t.Fatalf("got %v", got)
	}
}

func TestCheckRunningPodsReservedUpstream(t *testing.T) {
	pod := runningPod("p", "p1", "c1")
	ok := v1Reserved(upstreamAllocated("c1", "up", "gpu-0"), "p1")
	if got := CheckRunningPodsReserved([]corev1.Pod{pod}, Claims{V1: []resourcev1.ResourceClaim{ok}}); len(got) != 0 {
		t.Fatalf("got %v, want none", got)
	}
	got := CheckRunningPodsReserved([]corev1.Pod{pod}, Claims{V1: []resourcev1.ResourceClaim{upstreamAllocated("c1", "up", "gpu-0")}})
	if len(got) != 1 || !strings.Contains(got[0].Detail, "v1 claim c1 is not reserved") {
		t.Fatalf("got %v, want c1 not reserved", got)
	}
}

func TestClaimKind(t *testing.T) {
	cs := Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{allocated("a", "n1", "gpu-0")},
		V1: []resourcev1.ResourceClaim{v1Allocated("b", "n1", "gpu-1"), upstreamAllocated("c", "up", "gpu-0"), {ObjectMeta: metav1.ObjectMeta{Name: "d"}}}}
	var got []string
	for _, c := range cs.stored() {
		got = append(got, c.kind())
	}
	if want := []string{versionV1alpha2, versionV1, kindUpstream, versionV1}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("kinds %q, want %q", got, want)
	}
}

func TestCheckDriverStateLast(t *testing.T) {
	// The upstream driver writes a line per call: a claim prepared again
	// after a kill (u2) or unprepared twice (u3) is balanced when its last
	// line is an unprepare; an unprepare without a prepare (its prepare
	// line lost to a kill) is no leak.
	state := "prepare u1\nunprepare u1\n" +
		"prepare u2\nprepare u2\nunprepare u2\n" +
		"prepare u3\nunprepare u3\nunprepare u3\n" +
		"unprepare u4\n" +
		"prepare u5\n" +
		"prepare u6\nunprepare u6\nprepare u6\n" +
		"garbage\nprepare\n"
	got := CheckDriverStateLast("up upstream.example.com", state, map[types.UID]string{"u5": versionV1})
	if len(got) != 2 || got[0].Rule != RuleUnbalancedDriver ||
		got[0].Detail != "up upstream.example.com: v1 claim u5 not unprepared after its last prepare (1 prepare lines)" ||
		!strings.Contains(got[1].Detail, "u6 not unprepared after its last prepare (2 prepare lines)") {
		t.Fatalf("got %v, want u5 and u6 left prepared", got)
	}
	if got := CheckDriverStateLast("up", "", nil); len(got) != 0 {
		t.Fatalf("empty state: got %v", got)
	}
	// The example driver's count rule would flag u2 (two prepare lines,
	// one unprepare): it is not for this driver.
	if got := CheckDriverState("up", "prepare u2\nprepare u2\nunprepare u2\n", nil); len(got) != 1 {
		t.Fatalf("count rule: got %v", got)
	}
	prepared := PreparedUIDs(state)
	if len(prepared) != 5 || prepared["u4"] || !prepared["u6"] {
		t.Fatalf("prepared %v, want u1 u2 u3 u5 u6", prepared)
	}
}

func TestCheckPreparedKinds(t *testing.T) {
	prepared := map[types.UID]bool{"a": true, "u1": true}
	ran := map[types.UID]string{"a": versionV1alpha2, "u1": kindUpstream, "u2": kindUpstream}
	if got := CheckPreparedVersions(ran, prepared); len(got) != 0 {
		t.Fatalf("got %v, want none", got)
	}
	ran = map[types.UID]string{"a": versionV1alpha2, "u2": kindUpstream, "u3": kindUpstream}
	got := CheckPreparedVersions(ran, prepared)
	if len(got) != 1 || got[0].Rule != RuleNeverPrepared || !strings.Contains(got[0].Detail, "2 upstream v1 claims held by running pods") {
		t.Fatalf("got %v, want the upstream claims never prepared", got)
	}
}

// TestCheckNoDevicePreparedTwice: a device (or an overlapping partition)
// prepared for a second claim before the first claim's unprepare line is
// a violation; after it, or for the same claim again, it is not.
func TestCheckNoDevicePreparedTwice(t *testing.T) {
	named := strings.Join([]string{
		"prepare a ns/a gpu-0",
		"prepare a ns/a gpu-0", // the same claim again
		"prepare b ns/b gpu-1/halves/half-0",
		"prepare c ns/c gpu-0", // a still holds gpu-0
		"unprepare a ns/a",
		"prepare d ns/d gpu-1", // b holds a half of gpu-1
		"unprepare b ns/b",
		"unprepare c ns/c",
		"prepare e ns/e gpu-0,gpu-1/halves/half-1", // d holds gpu-1 whole
		"prepare f ns/f",                           // no devices recorded
	}, "\n")
	vs := CheckNoDevicePreparedTwice("n1", named, true)
	want := []string{"line 4 prepares gpu-0 for claim c while claim a holds gpu-0",
		"line 6 prepares gpu-1 for claim d while claim b holds gpu-1/halves/half-0",
		"line 9 prepares gpu-1/halves/half-1 for claim e while claim d holds gpu-1"}
	if len(vs) != len(want) {
		t.Fatalf("violations %v, want %d", vs, len(want))
	}
	for i, v := range vs {
		if v.Rule != RulePreparedTwice || !strings.Contains(v.Detail, want[i]) {
			t.Errorf("violation %d: %v, want %q", i, v, want[i])
		}
	}
	upstream := "prepare u1 gpu-0,gpu-1\nprepare u1 gpu-0,gpu-1\nprepare u2 gpu-1\nunprepare u1\nprepare u3 gpu-0\n"
	if vs := CheckNoDevicePreparedTwice("n2", upstream, false); len(vs) != 1 || !strings.Contains(vs[0].Detail, "line 3 prepares gpu-1 for claim u2 while claim u1 holds gpu-1") {
		t.Fatalf("upstream violations %v", vs)
	}
}
