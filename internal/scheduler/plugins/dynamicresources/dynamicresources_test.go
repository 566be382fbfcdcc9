package dynamicresources_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
	"allot.dev/allot/pkg/allocator"
)

const driver = "gpu.example.com"

// slice: two GPUs, each one 8Gi leaf, on node.
func slice(t *testing.T, node string) *resourceapi.NodeResourceSlice {
	t.Helper()
	s := &resourceapi.NodeResourceSlice{}
	mustYAML(t, `
metadata: {name: `+node+`-gpus}
spec:
  nodeName: `+node+`
  driverName: `+driver+`
  partitionable:
    commonAttributes: [{name: small, attributes: [{name: memory, quantity: 8Gi}]}]
    resourceInstances:
    - {name: gpu-0, commonAttributesRefs: [small]}
    - {name: gpu-1, commonAttributesRefs: [small]}
`, s)
	return s
}

func mustYAML(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatal(err)
	}
}

func class(controller string) *resourceapi.ResourceClass {
	return &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, DriverName: driver, ControllerName: controller}
}

func params(name, selector string) *resourceapi.ResourceClaimParameters {
	return &resourceapi.ResourceClaimParameters{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Requests: []resourceapi.ResourceRequest{{DriverName: driver, ResourceRequestModel: resourceapi.ResourceRequestModel{
			Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{{Name: "one", Selector: selector}}},
		}}},
	}
}

func claim(name, paramsName string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "5"},
		Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "gpu"}}
	if paramsName != "" {
		c.Spec.ParametersRef = &resourceapi.ResourceClaimParametersReference{APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: paramsName}
	}
	return c
}

func podUsing(name string, claims ...string) *corev1.Pod {
	p := schedtest.MakePod(name).UID("uid-" + name).Obj()
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr(c)})
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func baseLists(t *testing.T, claims ...*resourceapi.ResourceClaim) dynamicresources.Lists {
	return dynamicresources.Lists{
		Slices: []*resourceapi.NodeResourceSlice{slice(t, "n1")}, Classes: []*resourceapi.ResourceClass{class("")},
		ClaimParameters: []*resourceapi.ResourceClaimParameters{params("small", `quantities["memory"] >= "8Gi"`),
			params("huge", `quantities["memory"] >= "64Gi" && has(strings.x)`)},
		Claims: claims, Revision: "7",
	}
}

func snapshotOf(l dynamicresources.Lists, nodes ...string) *framework.Snapshot {
	var ns []*corev1.Node
	for _, n := range nodes {
		ns = append(ns, schedtest.MakeNode(n).Obj())
	}
	return framework.NewSnapshot(ns, nil).WithExtension(dynamicresources.Name, dynamicresources.NewObjects(l))
}

func TestPreFilter(t *testing.T) {
	inUse := claim("c", "small")
	inUse.Status.Allocation = &resourceapi.AllocationResult{}
	inUse.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: "o"}}
	deleting := claim("c", "small")
	deleting.DeletionTimestamp = &metav1.Time{}
	vendorRef := claim("c", "")
	vendorRef.Spec.ParametersRef = &resourceapi.ResourceClaimParametersReference{APIGroup: "dra.example.com", Kind: "CardParameters", Name: "p"}
	template := podUsing("p")
	template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("t")}}
	recorded := template.DeepCopy()
	recorded.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr("c")}}
	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		lists  func(l *dynamicresources.Lists)
		noExt  bool
		code   framework.Code
		reason string
	}{
		"no claims":                 {pod: podUsing("p"), code: framework.Skip},
		"fits":                      {pod: podUsing("p", "c"), code: framework.Success},
		"no extension":              {pod: podUsing("p", "c"), noExt: true, code: framework.Error, reason: dynamicresources.ErrReasonNoObjects},
		"claim missing":             {pod: podUsing("p", "x"), code: framework.Wait, reason: "waiting for resource claim default/x to be created"},
		"template claim not named":  {pod: template, code: framework.Wait, reason: "waiting for the resource claim of entry gpu (template t) to be created"},
		"template claim recorded":   {pod: recorded, code: framework.Success},
		"class missing":             {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) { l.Classes = nil }, code: framework.Wait, reason: "waiting for resource class gpu of claim default/c"},
		"claim parameters missing":  {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) { l.ClaimParameters = nil }, code: framework.Wait, reason: "ResourceClaimParameters for ResourceClaimParameters small"},
		"vendor parameters pending": {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) { l.Claims = []*resourceapi.ResourceClaim{vendorRef} }, code: framework.Wait, reason: "ResourceClaimParameters for CardParameters p"},
		"class parameters missing": {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) {
			l.Classes = []*resourceapi.ResourceClass{class("")}
			l.Classes[0].ParametersRef = &resourceapi.ResourceClassParametersReference{Kind: "ResourceClassParameters", Name: "cp"}
		}, code: framework.Wait, reason: "ResourceClassParameters for ResourceClassParameters cp of class gpu"},
		"control-plane class, claim pending": {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) { l.Classes = []*resourceapi.ResourceClass{class("ctrl")} },
			code: framework.Success},
		"claim in use":   {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) { l.Claims = []*resourceapi.ResourceClaim{inUse} }, code: framework.Unschedulable, reason: "in use by pods/other"},
		"claim deleting": {pod: podUsing("p", "c"), lists: func(l *dynamicresources.Lists) { l.Claims = []*resourceapi.ResourceClaim{deleting} }, code: framework.Unschedulable, reason: "is being deleted"},
	} {
		t.Run(name, func(t *testing.T) {
			l := baseLists(t, claim("c", "small"))
			if tc.lists != nil {
				tc.lists(&l)
			}
			snap := snapshotOf(l, "n1")
			if tc.noExt {
				snap = framework.NewSnapshot(nil, nil)
			}
			st := dynamicresources.New().PreFilter(context.Background(), framework.NewCycleState(), tc.pod, snap)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.reason) {
				t.Fatalf("PreFilter = %s %q, want %s containing %q", st.Code(), st.Message(), tc.code, tc.reason)
			}
		})
	}
}

// cycle runs PreFilter and Filter on n1 for a pod.
func cycle(t *testing.T, p *dynamicresources.DynamicResources, snap *framework.Snapshot, pod *corev1.Pod) (*framework.CycleState, *framework.Status) {
	t.Helper()
	state := framework.NewCycleState()
	if st := p.PreFilter(context.Background(), state, pod, snap); !st.IsSuccess() {
		t.Fatalf("PreFilter(%s) = %v", pod.Name, st.Message())
	}
	ni, _ := snap.Get("n1")
	return state, p.Filter(context.Background(), state, pod, ni)
}

func TestFilterQuotesClause(t *testing.T) {
	snap := snapshotOf(baseLists(t, claim("c", "huge")), "n1")
	_, st := cycle(t, dynamicresources.New(), snap, podUsing("p", "c"))
	if st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), `quantities["memory"] >= "64Gi"`) {
		t.Fatalf("Filter = %s %q, want the failing clause quoted", st.Code(), st.Message())
	}
}

func TestReserveHoldsInstancesUntilUnreserve(t *testing.T) {
	ctx := context.Background()
	p := dynamicresources.New()
	snap := snapshotOf(baseLists(t, claim("a", "small"), claim("b", "small"), claim("c", "small")), "n1")
	var states []*framework.CycleState
	for _, name := range []string{"a", "b"} {
		state, st := cycle(t, p, snap, podUsing("pod-"+name, name))
		if !st.IsSuccess() {
			t.Fatalf("pod-%s: %v", name, st.Message())
		}
		if st := p.Reserve(ctx, state, podUsing("pod-"+name, name), "n1"); !st.IsSuccess() {
			t.Fatal(st.Message())
		}
		states = append(states, state)
	}
	if _, st := cycle(t, p, snap, podUsing("pod-c", "c")); st.Code() != framework.Unschedulable {
		t.Fatalf("third pod with both GPUs reserved: %s %q, want Unschedulable", st.Code(), st.Message())
	}
	p.Unreserve(ctx, states[1], podUsing("pod-b", "b"), "n1")
	if _, st := cycle(t, p, snap, podUsing("pod-c", "c")); !st.IsSuccess() {
		t.Fatalf("after Unreserve: %q", st.Message())
	}
}

func TestContributeBindingAndFences(t *testing.T) {
	ctx := context.Background()
	p := dynamicresources.New()
	allocated := claim("shared", "small")
	allocated.ResourceVersion = "6"
	allocated.Status.Allocation = &resourceapi.AllocationResult{Shareable: true}
	l := baseLists(t, claim("a", "small"), claim("b", "small"), allocated)
	snap := snapshotOf(l, "n1")
	pod := podUsing("pod-a", "a", "shared")
	state, st := cycle(t, p, snap, pod)
	if !st.IsSuccess() || !p.Reserve(ctx, state, pod, "n1").IsSuccess() {
		t.Fatalf("pod-a: %v", st.Message())
	}
	b := &corev1.Binding{}
	if st := p.ContributeBinding(ctx, state, pod, "n1", b); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if len(b.ResourceClaims) != 2 || b.ResourceClaims[0].Name != "a" || b.ResourceClaims[0].ResourceVersion != "5" ||
		b.ResourceClaims[0].DriverName != driver || b.ResourceClaims[1].Allocation != nil || b.ResourceClaims[1].ResourceVersion != "6" {
		t.Fatalf("ResourceClaims = %+v", b.ResourceClaims)
	}
	var alloc resourceapi.AllocationResult
	if err := json.Unmarshal(b.ResourceClaims[0].Allocation.Raw, &alloc); err != nil || alloc.ResourceHandles[0].StructuredData.NodeName != "n1" {
		t.Fatalf("allocation %s: %v", b.ResourceClaims[0].Allocation.Raw, err)
	}
	want := []corev1.AllocationFence{{NodeName: "n1", DriverName: driver, Revision: "7"}}
	if len(b.AllocationFences) != 1 || b.AllocationFences[0] != want[0] {
		t.Fatalf("AllocationFences = %+v, want %+v", b.AllocationFences, want)
	}
	p.PostBind(ctx, state, pod, "n1", "12")
	// The next pod, decided before the informer shows the binding, fences
	// with the binding's revision and still sees gpu-0 taken.
	podB := podUsing("pod-b", "b")
	stateB, st := cycle(t, p, snap, podB)
	if !st.IsSuccess() || !p.Reserve(ctx, stateB, podB, "n1").IsSuccess() {
		t.Fatalf("pod-b: %v", st.Message())
	}
	bb := &corev1.Binding{}
	p.ContributeBinding(ctx, stateB, podB, "n1", bb)
	t.Logf("pod-a %s; pod-b %s", b.ResourceClaims[0].Allocation.Raw, bb.ResourceClaims[0].Allocation.Raw)
	if bb.AllocationFences[0].Revision != "12" {
		t.Fatalf("fence after own binding = %+v, want revision 12", bb.AllocationFences)
	}
	if got, _ := json.Marshal(bb.ResourceClaims[0]); strings.Contains(string(got), alloc.ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID+`"`) {
		t.Fatalf("pod-b got pod-a's instance: %s", got)
	}
}

// Once the informers show a bound claim at or after the binding's
// revision, the in-memory copy is dropped: a later deallocation frees the
// instance.
func TestReservationDroppedOnceVisible(t *testing.T) {
	ctx := context.Background()
	p := dynamicresources.New()
	l := baseLists(t, claim("a", "small"), claim("c", "small"))
	pod := podUsing("pod-a", "a")
	state, st := cycle(t, p, snapshotOf(l, "n1"), pod)
	if !st.IsSuccess() || !p.Reserve(ctx, state, pod, "n1").IsSuccess() {
		t.Fatalf("pod-a: %v", st.Message())
	}
	p.PostBind(ctx, state, pod, "n1", "12")
	bound := dynamicresources.BoundClaims(state)[0].DeepCopy()
	bound.ResourceVersion = "12"
	seen := snapshotOf(baseLists(t, bound, claim("c", "small")), "n1")
	if _, st := cycle(t, p, seen, podUsing("pod-c", "c")); !st.IsSuccess() {
		t.Fatalf("pod-c with the binding visible: %q", st.Message())
	}
	freed := claim("a", "small")
	freed.ResourceVersion = "13"
	two := baseLists(t, freed, claim("c", "small"), claim("d", "small"))
	snap := snapshotOf(two, "n1")
	stateC, st := cycle(t, p, snap, podUsing("pod-c", "c"))
	if !st.IsSuccess() || !p.Reserve(ctx, stateC, podUsing("pod-c", "c"), "n1").IsSuccess() {
		t.Fatalf("pod-c: %q", st.Message())
	}
	if _, st := cycle(t, p, snap, podUsing("pod-d", "d")); !st.IsSuccess() {
		t.Fatalf("pod-d after a was deallocated: %q (stale in-memory claim?)", st.Message())
	}
}

// A search cut off by the deadline is an Error (retried), never
// Unschedulable.
func TestDeadlineIsError(t *testing.T) {
	s := &resourceapi.NodeResourceSlice{}
	s.Name, s.Spec.NodeName, s.Spec.DriverName = "n1-many", "n1", driver
	s.Spec.Partitionable = &resourceapi.PartitionableResources{}
	many := params("many", "")
	many.Requests[0].Partitionable.Required = nil
	for i := range 100 {
		s.Spec.Partitionable.ResourceInstances = append(s.Spec.Partitionable.ResourceInstances,
			resourceapi.ResourceInstance{Name: fmt.Sprintf("gpu-%d", i), Attributes: []resourceapi.Attribute{
				{Name: "index", AttributeValue: resourceapi.AttributeValue{Int: ptr(int64(i))}}}})
		if i < 90 {
			many.Requests[0].Partitionable.Required = append(many.Requests[0].Partitionable.Required,
				resourceapi.PartitionableResourceRequest{Name: fmt.Sprintf("r%d", i), Selector: fmt.Sprintf(`ints["index"] >= %d`, i%7)})
		}
	}
	l := dynamicresources.Lists{Slices: []*resourceapi.NodeResourceSlice{s}, Classes: []*resourceapi.ResourceClass{class("")},
		ClaimParameters: []*resourceapi.ResourceClaimParameters{many}, Claims: []*resourceapi.ResourceClaim{claim("c", "many")}}
	snap := snapshotOf(l, "n1")
	p := dynamicresources.New()
	pod := podUsing("p", "c")
	state := framework.NewCycleState()
	if st := p.PreFilter(context.Background(), state, pod, snap); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ni, _ := snap.Get("n1")
	st := p.Filter(ctx, state, pod, ni)
	if st.Code() != framework.Error || !errors.Is(st.Err(), allocator.ErrDeadline) {
		t.Fatalf("Filter with an ended context = %s %q, want Error wrapping ErrDeadline", st.Code(), st.Message())
	}
}

func TestFilterRejectsNodesWithoutCDI(t *testing.T) {
	l := baseLists(t, claim("c", "small"))
	for name, tc := range map[string]struct {
		label string
		want  framework.Code
	}{
		"cdi false":     {"false", framework.UnschedulableAndUnresolvable},
		"cdi true":      {"true", framework.Success},
		"label missing": {"", framework.Success},
	} {
		t.Run(name, func(t *testing.T) {
			node := schedtest.MakeNode("n1").Obj()
			if tc.label != "" {
				node.Labels = map[string]string{dynamicresources.LabelCDI: tc.label}
			}
			snap := framework.NewSnapshot([]*corev1.Node{node}, nil).WithExtension(dynamicresources.Name, dynamicresources.NewObjects(l))
			_, st := cycle(t, dynamicresources.New(), snap, podUsing("p", "c"))
			if st.Code() != tc.want {
				t.Fatalf("Filter = %s %q, want %s", st.Code(), st.Message(), tc.want)
			}
		})
	}
}

// ClaimsReady: allocated and reserved for the pod as the lookup shows, or
// as the plugin's committed binding left it; not while that binding is
// only reserved, and never for a claim that is missing or not recorded.
func TestClaimsReady(t *testing.T) {
	ctx := context.Background()
	pod := podUsing("p", "a")
	reserved := claim("a", "small")
	reserved.Status.Allocation = &resourceapi.AllocationResult{}
	reserved.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: pod.UID}}
	other := reserved.DeepCopy()
	other.Status.ReservedFor[0].UID = "someone-else"
	unreserved := reserved.DeepCopy()
	unreserved.Status.ReservedFor = nil
	template := podUsing("p")
	template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("t")}}
	recorded := template.DeepCopy()
	recorded.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr("a")}}
	lookup := func(cs ...*resourceapi.ResourceClaim) func(string, string) (*resourceapi.ResourceClaim, bool) {
		return dynamicresources.NewObjects(dynamicresources.Lists{Claims: cs}).Claim
	}
	p := dynamicresources.New()
	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		claims []*resourceapi.ResourceClaim
		want   bool
	}{
		"no claims":               {pod: podUsing("p"), want: true},
		"reserved":                {pod: pod, claims: []*resourceapi.ResourceClaim{reserved}, want: true},
		"missing":                 {pod: pod},
		"not allocated":           {pod: pod, claims: []*resourceapi.ResourceClaim{claim("a", "small")}},
		"allocated, not reserved": {pod: pod, claims: []*resourceapi.ResourceClaim{unreserved}},
		"reserved for another":    {pod: pod, claims: []*resourceapi.ResourceClaim{other}},
		"template not recorded":   {pod: template, claims: []*resourceapi.ResourceClaim{reserved}},
		"template recorded":       {pod: recorded, claims: []*resourceapi.ResourceClaim{reserved}, want: true},
	} {
		if got := p.ClaimsReady(tc.pod, lookup(tc.claims...)); got != tc.want {
			t.Errorf("%s: ClaimsReady = %v, want %v", name, got, tc.want)
		}
	}
	// The plugin's own binding: not ready while reserved, ready once
	// committed, even though the lookup still shows the claim unallocated.
	state, st := cycle(t, p, snapshotOf(baseLists(t, claim("a", "small")), "n1"), pod)
	if !st.IsSuccess() || !p.Reserve(ctx, state, pod, "n1").IsSuccess() {
		t.Fatalf("reserve: %v", st.Message())
	}
	stale := lookup(claim("a", "small"))
	if p.ClaimsReady(pod, stale) {
		t.Fatal("ready before the binding was committed")
	}
	p.PostBind(ctx, state, pod, "n1", "12")
	if !p.ClaimsReady(pod, stale) {
		t.Fatal("not ready after the binding was committed")
	}
	if p.ClaimsReady(podUsing("q", "a"), stale) {
		t.Fatal("another pod's binding made the claim ready for q")
	}
}

// TestFilterReusesChecksAcrossPods: pods whose claims have the same shape
// share the allocator's answer for a node whose state is unchanged, with
// the reasons naming each pod's own claim; a node whose claims changed, or
// that holds in-memory allocations, is checked again.
func TestFilterReusesChecksAcrossPods(t *testing.T) {
	ctx := context.Background()
	versioned := func(claims ...*resourceapi.ResourceClaim) dynamicresources.Lists {
		l := baseLists(t, claims...)
		l.Classes[0].ResourceVersion = "3"
		return l
	}
	onGPU := func(name, gpu string) *resourceapi.ResourceClaim {
		c := claim(name, "small")
		c.Status.Allocation = &resourceapi.AllocationResult{
			AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
			ResourceHandles: []resourceapi.ResourceHandle{{DriverName: driver, StructuredData: &resourceapi.StructuredResourceHandle{
				NodeName: "n1", Partitionable: &resourceapi.PartitionableAllocationResult{Instances: []resourceapi.AllocatedResourceInstance{{ID: gpu}}}}}},
		}
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod-" + name, UID: types.UID("uid-pod-" + name)}}
		return c
	}
	p := dynamicresources.NewCountingReuse()

	// Both GPUs taken: the second pod gets the first pod's answer, about
	// its own claim.
	full := snapshotOf(versioned(onGPU("a", "gpu-0"), onGPU("b", "gpu-1"), claim("c", "small"), claim("d", "small")), "n1")
	if _, st := cycle(t, p, full, podUsing("pod-c", "c")); st.Code() != framework.Unschedulable || !strings.Contains(st.Message(), "claim default/c") {
		t.Fatalf("pod-c on a full node: %s %q", st.Code(), st.Message())
	}
	if p.ReusedChecks() != 0 {
		t.Fatalf("%d reused answers before a second pod", p.ReusedChecks())
	}
	_, st := cycle(t, p, full, podUsing("pod-d", "d"))
	if st.Code() != framework.Unschedulable || !strings.Contains(st.Message(), "claim default/d") || strings.Contains(st.Message(), "default/c") {
		t.Fatalf("pod-d on a full node: %s %q, want its own claim named", st.Code(), st.Message())
	}
	if p.ReusedChecks() != 1 {
		t.Fatalf("pod-d: %d reused answers, want 1", p.ReusedChecks())
	}

	// b freed: the node's state changed, so the answer is new.
	freed := snapshotOf(versioned(onGPU("a", "gpu-0"), claim("b", "small"), claim("c", "small"), claim("d", "small"), claim("e", "small")), "n1")
	stateC, st := cycle(t, p, freed, podUsing("pod-c", "c"))
	if !st.IsSuccess() {
		t.Fatalf("pod-c after b was freed: %q", st.Message())
	}
	if p.ReusedChecks() != 1 {
		t.Fatalf("a changed node answered from the cache (%d reused)", p.ReusedChecks())
	}
	// pod-c holds the free GPU in memory: pod-d must not take the cached
	// "fits" of the node without it; pod-e, with the same reservation in
	// flight, shares pod-d's answer.
	if st := p.Reserve(ctx, stateC, podUsing("pod-c", "c"), "n1"); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	for i, pod := range []string{"d", "e"} {
		_, st := cycle(t, p, freed, podUsing("pod-"+pod, pod))
		if st.Code() != framework.Unschedulable || !strings.Contains(st.Message(), "claim default/"+pod) {
			t.Fatalf("pod-%s with the last GPU reserved by pod-c: %s %q, want Unschedulable about its claim", pod, st.Code(), st.Message())
		}
		if got := p.ReusedChecks(); got != int64(1+i) {
			t.Fatalf("pod-%s: %d reused answers, want %d", pod, got, 1+i)
		}
	}
	// Without the reservation the node is back to the state pod-c was
	// checked on, which keeps that answer: pod-d and pod-e take it.
	p.Unreserve(ctx, stateC, podUsing("pod-c", "c"), "n1")
	if _, st := cycle(t, p, freed, podUsing("pod-d", "d")); !st.IsSuccess() || p.ReusedChecks() != 3 {
		t.Fatalf("pod-d after Unreserve: %q, %d reused answers, want success and 3", st.Message(), p.ReusedChecks())
	}
	stateE, st := cycle(t, p, freed, podUsing("pod-e", "e"))
	if !st.IsSuccess() || p.ReusedChecks() != 4 {
		t.Fatalf("pod-e: %q, %d reused answers, want success and 4", st.Message(), p.ReusedChecks())
	}
	// The reused answer builds pod-e's own allocation.
	if st := p.Reserve(ctx, stateE, podUsing("pod-e", "e"), "n1"); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	b := &corev1.Binding{}
	if st := p.ContributeBinding(ctx, stateE, podUsing("pod-e", "e"), "n1", b); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Name != "e" || b.ResourceClaims[0].Allocation == nil {
		t.Fatalf("pod-e's binding: %+v", b.ResourceClaims)
	}
	alloc, err := json.Marshal(b.ResourceClaims[0].Allocation)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(alloc), `"gpu-1"`) || strings.Contains(string(alloc), `"gpu-0"`) {
		t.Fatalf("pod-e's allocation %s, want the free gpu-1", alloc)
	}
}

// TestAnswersCarryOverUnchangedNodes: a cycle takes an earlier cycle's
// answer for a node whose NodeInfo and allocated claims are the same
// since, for a pod of the same request signature, and checks again a
// node whose claims changed (WithClaimChanges), whose NodeInfo is new,
// or that has claims of a pod in flight.
func TestAnswersCarryOverUnchangedNodes(t *testing.T) {
	ctx := context.Background()
	l := baseLists(t, claim("a", "small"), claim("b", "small"), claim("c", "small"), claim("d", "small"),
		claim("x", "small"), claim("y", "small"))
	l.Classes[0].ResourceVersion = "3"
	l.Slices = []*resourceapi.NodeResourceSlice{slice(t, "n1"), slice(t, "n2"), slice(t, "n3")}
	objs := dynamicresources.NewObjects(l)
	nodes := framework.NewSnapshot([]*corev1.Node{schedtest.MakeNode("n1").Obj(), schedtest.MakeNode("n2").Obj(), schedtest.MakeNode("n3").Obj()}, nil)
	p := dynamicresources.NewCountingReuse()
	f, err := framework.New([]framework.Plugin{p}, framework.Options{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	run := func(snap *framework.Snapshot, pod *corev1.Pod) (*framework.CycleState, *framework.Diagnosis) {
		t.Helper()
		state := framework.NewCycleState()
		d := f.Schedule(ctx, state, snap, pod)
		if !d.Status.IsSuccess() {
			t.Fatalf("%s: %s", pod.Name, d.Message())
		}
		return state, d
	}
	run(nodes.WithExtension(dynamicresources.Name, objs), podUsing("pod-a", "a"))
	if got := p.ReusedChecks(); got != 0 {
		t.Fatalf("first pod: %d reused answers", got)
	}

	// n1 fills up: the next pod checks n1 again and takes n2's and n3's
	// answers.
	full := objs.WithClaimChanges("11", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{
		"default/x": onGPU(claim("x", "small"), "n1", "gpu-0"), "default/y": onGPU(claim("y", "small"), "n1", "gpu-1")}})
	state, _ := run(nodes.WithExtension(dynamicresources.Name, full), podUsing("pod-b", "b"))
	if got := p.ReusedChecks(); got != 2 {
		t.Fatalf("after n1 changed: %d reused answers, want 2 (n2, n3)", got)
	}
	if r := dynamicresources.Result(state, "n1"); r == nil || r.Fits {
		t.Fatalf("n1 with both GPUs allocated: %+v, want a rejection", r)
	}
	if r := dynamicresources.Result(state, "n2"); r == nil || !r.Fits {
		t.Fatalf("n2: %+v, want it to fit", r)
	}

	// pod-b is in flight on n2 (reserved, not yet in the Objects): n2 is
	// checked with it, n1 and n3 are taken from before.
	if st := p.Reserve(ctx, state, podUsing("pod-b", "b"), "n2"); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	run(nodes.WithExtension(dynamicresources.Name, full), podUsing("pod-c", "c"))
	if got := p.ReusedChecks(); got != 4 {
		t.Fatalf("with pod-b in flight on n2: %d reused answers, want 4", got)
	}
	p.Unreserve(ctx, state, podUsing("pod-b", "b"), "n2")

	// Every NodeInfo new, and a new node object for n3: n1 and n2 keep
	// their node states, whose last answers they give again
	// (allocator.CheckReusing); n3 is checked.
	changed := framework.NewSnapshot([]*corev1.Node{nodes.Nodes()[0].Node(), nodes.Nodes()[1].Node(), schedtest.MakeNode("n3").Label("zone", "z").Obj()}, nil)
	run(changed.WithExtension(dynamicresources.Name, full), podUsing("pod-d", "d"))
	if got := p.ReusedChecks(); got != 6 {
		t.Fatalf("with every NodeInfo new: %d reused answers, want 6 (n1, n2)", got)
	}
}

// v1Claim is a resource.k8s.io/v1 claim for one device of the driver
// (the seed GPUs seen as v1 devices), through class gpu-v1.
func v1Claim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "5"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu-v1", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}
}

// mixedLists: node n1's two GPUs, a v1alpha2 class and a v1 DeviceClass
// for them, and the claims of both versions.
func mixedLists(t *testing.T, claims []*resourceapi.ResourceClaim, v1Claims ...*resourcev1.ResourceClaim) dynamicresources.Lists {
	l := baseLists(t, claims...)
	l.DeviceClasses = []*resourcev1.DeviceClass{gpuV1Class()}
	l.V1Claims = v1Claims
	return l
}

// gpuV1Class is DeviceClass gpu-v1: every device of the driver.
func gpuV1Class() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-v1"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
}

// A seed GPU is one device for both APIs: what pods in flight hold in
// memory through one version is not handed out through the other before
// the informers show it (found by the chaos suite right after a scheduler
// restart), nor does one pod get the same GPU for a claim of each version.
func TestInFlightAcrossVersions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		first []string // claims of the pods reserved first, one pod each
		last  []string // the last pod's claims
		want  framework.Code
	}{
		{"v1alpha2 pods in flight, then a v1 pod", []string{"a", "b"}, []string{"v1-c"}, framework.Unschedulable},
		{"v1 pods in flight, then a v1alpha2 pod", []string{"v1-a", "v1-b"}, []string{"c"}, framework.Unschedulable},
		{"one of each in flight, then a v1 pod", []string{"a", "v1-b"}, []string{"v1-c"}, framework.Unschedulable},
		{"one v1alpha2 pod in flight, then one pod with a claim of each version", []string{"a"}, []string{"b", "v1-c"}, framework.Unschedulable},
		{"one pod with a claim of each version", nil, []string{"a", "v1-b"}, framework.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var claims []*resourceapi.ResourceClaim
			var v1Claims []*resourcev1.ResourceClaim
			for _, n := range []string{"a", "b", "c"} {
				claims = append(claims, claim(n, "small"))
				v1Claims = append(v1Claims, v1Claim("v1-"+n))
			}
			snap := snapshotOf(mixedLists(t, claims, v1Claims...), "n1")
			p := dynamicresources.New()
			for _, c := range tc.first {
				pod := podUsing("pod-"+c, c)
				state, st := cycle(t, p, snap, pod)
				if !st.IsSuccess() {
					t.Fatalf("pod-%s: %v", c, st.Message())
				}
				if st := p.Reserve(ctx, state, pod, "n1"); !st.IsSuccess() {
					t.Fatal(st.Message())
				}
			}
			pod := podUsing("last", tc.last...)
			state := framework.NewCycleState()
			if st := p.PreFilter(ctx, state, pod, snap); !st.IsSuccess() {
				t.Fatalf("PreFilter = %v", st.Message())
			}
			// A clone of the cycle's state (preemption's what-ifs) judges
			// as the state does.
			ni, _ := snap.Get("n1")
			if st := p.Filter(ctx, state.Clone(), pod, ni); st.Code() != tc.want {
				t.Fatalf("last pod on a cloned state: %s %q, want %s", st.Code(), st.Message(), tc.want)
			}
			if st := p.Filter(ctx, state, pod, ni); st.Code() != tc.want {
				t.Fatalf("last pod: %s %q, want %s", st.Code(), st.Message(), tc.want)
			}
			if tc.want != framework.Success {
				return
			}
			if st := p.Reserve(ctx, state, pod, "n1"); !st.IsSuccess() {
				t.Fatal(st.Message())
			}
			// Both GPUs are held now, one through each version.
			if _, st := cycle(t, p, snap, podUsing("after", "c")); st.Code() != framework.Unschedulable {
				t.Fatalf("a third GPU claim: %s %q, want Unschedulable", st.Code(), st.Message())
			}
		})
	}
}

// TestResultOfAPodWithOnlyV1Claims: Filter keeps no seed answers for a
// pod without v1alpha2 claims, and Result still reports the node's own
// where the cycle judged it (fitting, the node's capacity in the cycle's
// state, the pods in flight counted), as allocator.Check did per node,
// and nothing where it did not.
func TestResultOfAPodWithOnlyV1Claims(t *testing.T) {
	ctx := context.Background()
	snap := snapshotOf(mixedLists(t, nil, v1Claim("v1-b"), v1Claim("v1-c")), "n1", "n2")
	p := dynamicresources.New()
	check := func(pod *corev1.Pod, capacity int) {
		t.Helper()
		state, st := cycle(t, p, snap, pod)
		if !st.IsSuccess() {
			t.Fatalf("%s: Filter = %v", pod.Name, st.Message())
		}
		res := dynamicresources.Result(state, "n1")
		if res == nil || !res.Fits || res.Node != "n1" || res.CapacityBefore != capacity || res.CapacityAfter != capacity || res.Score != 100 || len(res.Reasons) > 0 {
			t.Fatalf("%s: Result = %+v, want n1 fitting with capacity %d before and after, score 100", pod.Name, res, capacity)
		}
		if res := dynamicresources.Result(state, "n2"); res != nil {
			t.Fatalf("%s: Result on n2, which the cycle did not filter = %+v, want nil", pod.Name, res)
		}
		if st := p.Reserve(ctx, state, pod, "n1"); !st.IsSuccess() {
			t.Fatalf("%s: Reserve = %v", pod.Name, st.Message())
		}
	}
	check(podUsing("first", "v1-b"), 2)
	check(podUsing("second", "v1-c"), 1) // first holds a GPU in flight
}
