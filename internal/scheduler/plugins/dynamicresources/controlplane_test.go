package dynamicresources_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

const fabric = "fabric.example.com"

// cpClaim is a claim of the control-plane class "fabric".
func cpClaim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "3"},
		Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "fabric"}}
}

// allocatedOn marks a claim allocated by the fabric controller, usable on
// the named nodes.
func allocatedOn(c *resourceapi.ResourceClaim, nodes ...string) *resourceapi.ResourceClaim {
	c.Status.DriverName, c.Status.ControllerName = fabric, fabric
	c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{{DriverName: fabric, Data: "x"}},
		AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}}}
	return c
}

func cpContext(pod *corev1.Pod, selected string, unsuitable map[string][]string) *resourceapi.PodSchedulingContext {
	sc := &resourceapi.PodSchedulingContext{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}}
	sc.Spec.SelectedNode = selected
	for entry, nodes := range unsuitable {
		sc.Status.ResourceClaims = append(sc.Status.ResourceClaims, resourceapi.ResourceClaimSchedulingStatus{Name: entry, UnsuitableNodes: nodes})
	}
	return sc
}

// cpRun runs the DRA plugin alone over nodes n1..n3 (n3 labelled
// zone=b) with the fabric class.
func cpRun(t *testing.T, p *dynamicresources.DynamicResources, pod *corev1.Pod, claims []*resourceapi.ResourceClaim,
	sc *resourceapi.PodSchedulingContext, mutate func(*resourceapi.ResourceClass)) (*framework.CycleState, *framework.Diagnosis) {
	t.Helper()
	cls := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, DriverName: fabric, ControllerName: fabric}
	if mutate != nil {
		mutate(cls)
	}
	l := dynamicresources.Lists{Classes: []*resourceapi.ResourceClass{cls}, Claims: claims}
	if sc != nil {
		l.Contexts = []*resourceapi.PodSchedulingContext{sc}
	}
	nodes := []*corev1.Node{schedtest.MakeNode("n1").Obj(), schedtest.MakeNode("n2").Obj(), schedtest.MakeNode("n3").Label("zone", "b").Obj()}
	snap := framework.NewSnapshot(nodes, nil).WithExtension(dynamicresources.Name, dynamicresources.NewObjects(l))
	fw, err := framework.New([]framework.Plugin{p}, framework.Options{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	return state, fw.Schedule(context.Background(), state, snap, pod)
}

func TestControlPlanePreFilterAndFilter(t *testing.T) {
	pod := podUsing("p", "c")
	immediate := cpClaim("c")
	immediate.Spec.AllocationMode = resourceapi.AllocationModeImmediate
	dealloc := allocatedOn(cpClaim("c"), "n1")
	dealloc.Status.DeallocationRequested = true
	inUse := allocatedOn(cpClaim("c"), "n1", "n2")
	inUse.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: "o"}}
	zoneB := func(c *resourceapi.ResourceClass) {
		c.SuitableNodes = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}
	}
	for name, tc := range map[string]struct {
		claim    *resourceapi.ResourceClaim
		sc       *resourceapi.PodSchedulingContext
		class    func(*resourceapi.ResourceClass)
		code     framework.Code
		feasible []string
		message  string
	}{
		"pending claim fits every node": {claim: cpClaim("c"), feasible: []string{"n1", "n2", "n3"}},
		"immediate claim not allocated": {claim: immediate, code: framework.Wait, message: dynamicresources.ReasonWaitingForAllocation},
		"deallocation requested":        {claim: dealloc, code: framework.Wait, message: "waiting for resource driver to deallocate claim default/c"},
		"in use by another pod":         {claim: inUse, code: framework.Unschedulable, message: "in use by pods/other"},
		"allocated for n1":              {claim: allocatedOn(cpClaim("c"), "n1"), feasible: []string{"n1"}},
		"class suits zone b":            {claim: cpClaim("c"), class: zoneB, feasible: []string{"n3"}},
		"driver: n1 and n2 unsuitable": {claim: cpClaim("c"), sc: cpContext(pod, "", map[string][]string{"c": {"n1", "n2"}}),
			feasible: []string{"n3"}},
		"another pod's context is ignored": {claim: cpClaim("c"),
			sc:       cpContext(schedtest.MakePod("p").UID("old").Obj(), "", map[string][]string{"c": {"n1"}}),
			feasible: []string{"n1", "n2", "n3"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, d := cpRun(t, dynamicresources.New(), pod, []*resourceapi.ResourceClaim{tc.claim}, tc.sc, tc.class)
			if d.Status.Code() != tc.code || !strings.Contains(d.Message(), tc.message) {
				t.Fatalf("status %s %q, want %s containing %q", d.Status.Code(), d.Message(), tc.code, tc.message)
			}
			var got []string
			for _, r := range d.Feasible() {
				got = append(got, r.Node)
			}
			if strings.Join(got, ",") != strings.Join(tc.feasible, ",") {
				t.Errorf("feasible %v, want %v", got, tc.feasible)
			}
		})
	}
}

func TestNegotiate(t *testing.T) {
	one := podUsing("p", "c")
	two := podUsing("p", "a", "b")
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		claims   []*resourceapi.ResourceClaim
		sc       *resourceapi.PodSchedulingContext
		selected string // "" means nothing selected yet; "*" any node
		message  string
	}{
		"one pending claim: select at once": {pod: one, claims: []*resourceapi.ResourceClaim{cpClaim("c")}, selected: "*",
			message: dynamicresources.ReasonWaitingForAllocation},
		"two pending claims, no answers: wait": {pod: two, claims: []*resourceapi.ResourceClaim{cpClaim("a"), cpClaim("b")},
			message: dynamicresources.ReasonWaitingForInformation},
		"two pending claims, one answer: wait": {pod: two, claims: []*resourceapi.ResourceClaim{cpClaim("a"), cpClaim("b")},
			sc: cpContext(two, "", map[string][]string{"a": {"n1"}}), message: dynamicresources.ReasonWaitingForInformation},
		"two pending claims, both answered: select a suitable node": {pod: two, claims: []*resourceapi.ResourceClaim{cpClaim("a"), cpClaim("b")},
			sc: cpContext(two, "", map[string][]string{"a": {"n1"}, "b": {"n2"}}), selected: "n3", message: dynamicresources.ReasonWaitingForAllocation},
		"selected node kept while feasible": {pod: one, claims: []*resourceapi.ResourceClaim{cpClaim("c")},
			sc: cpContext(one, "n2", nil), selected: "n2", message: dynamicresources.ReasonWaitingForAllocation},
		"selected node reported unsuitable: another one": {pod: one, claims: []*resourceapi.ResourceClaim{cpClaim("c")},
			sc: cpContext(one, "n2", map[string][]string{"c": {"n2"}}), selected: "*", message: dynamicresources.ReasonWaitingForAllocation},
	} {
		t.Run(name, func(t *testing.T) {
			state, d := cpRun(t, dynamicresources.New(), tc.pod, tc.claims, tc.sc, nil)
			if !d.Status.IsSuccess() {
				t.Fatalf("cycle: %v", d.Status)
			}
			n := dynamicresources.Negotiate(state, d)
			if n == nil {
				t.Fatal("no negotiation for pending claims")
			}
			if n.Status.Code() != framework.Wait || !strings.HasPrefix(n.Status.Message(), tc.message) {
				t.Errorf("status %v, want Wait %q", n.Status, tc.message)
			}
			sel := n.Spec.SelectedNode
			switch {
			case tc.selected == "*" && (sel == "" || (tc.sc != nil && sel == tc.sc.Spec.SelectedNode)):
				t.Errorf("selected %q, want a new node", sel)
			case tc.selected != "*" && sel != tc.selected:
				t.Errorf("selected %q, want %q", sel, tc.selected)
			}
			for _, p := range n.Spec.PotentialNodes {
				if tc.sc != nil && slicesHas(tc.sc.Status.ResourceClaims, p) {
					t.Errorf("potential node %s was reported unsuitable", p)
				}
			}
		})
	}
	t.Run("no pending claim", func(t *testing.T) {
		state, d := cpRun(t, dynamicresources.New(), one, []*resourceapi.ResourceClaim{allocatedOn(cpClaim("c"), "n1")}, nil, nil)
		if n := dynamicresources.Negotiate(state, d); n != nil {
			t.Fatalf("negotiation %+v for an allocated claim", n)
		}
	})
}

func slicesHas(st []resourceapi.ResourceClaimSchedulingStatus, node string) bool {
	for _, s := range st {
		for _, n := range s.UnsuitableNodes {
			if n == node {
				return true
			}
		}
	}
	return false
}

func TestPotentialNodesAtMost128(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 200 {
		nodes = append(nodes, schedtest.MakeNode(fmt.Sprintf("n%03d", i)).Obj())
	}
	pod := podUsing("p", "c")
	cls := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, DriverName: fabric, ControllerName: fabric}
	l := dynamicresources.Lists{Classes: []*resourceapi.ResourceClass{cls}, Claims: []*resourceapi.ResourceClaim{cpClaim("c")}}
	snap := framework.NewSnapshot(nodes, nil).WithExtension(dynamicresources.Name, dynamicresources.NewObjects(l))
	fw, err := framework.New([]framework.Plugin{dynamicresources.New()}, framework.Options{Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	d := fw.Schedule(context.Background(), state, snap, pod)
	n := dynamicresources.Negotiate(state, d)
	if n == nil || len(n.Spec.PotentialNodes) != resourceapi.PodSchedulingNodeListMaxSize {
		t.Fatalf("potential nodes: %+v", n)
	}
	found := false
	for _, p := range n.Spec.PotentialNodes {
		found = found || p == n.Spec.SelectedNode
	}
	if !found {
		t.Errorf("selected node %s is not among the potential nodes", n.Spec.SelectedNode)
	}
}

func TestPostFilterRequestsDeallocation(t *testing.T) {
	pod := podUsing("p", "a", "b")
	mine := allocatedOn(cpClaim("a"), "n1")
	mine.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: pod.UID}}
	immediate := allocatedOn(cpClaim("a"), "n1")
	immediate.Spec.AllocationMode = resourceapi.AllocationModeImmediate
	for name, tc := range map[string]struct {
		a    *resourceapi.ResourceClaim
		want bool
	}{
		"allocated on n1, reserved for the pod": {a: mine, want: true},
		"allocated on n1, unused":               {a: allocatedOn(cpClaim("a"), "n1"), want: true},
		"immediate claims stay":                 {a: immediate},
		"available everywhere":                  {a: allocatedOn(cpClaim("a"), "n1", "n2", "n3")},
	} {
		t.Run(name, func(t *testing.T) {
			// b is unsuitable where a is available: no node fits.
			sc := cpContext(pod, "n1", map[string][]string{"b": {"n1", "n2", "n3"}})
			p := dynamicresources.New()
			state, d := cpRun(t, p, pod, []*resourceapi.ResourceClaim{tc.a, cpClaim("b")}, sc, nil)
			if !d.Status.IsRejected() {
				t.Fatalf("cycle: %v", d.Status)
			}
			st := p.PostFilter(context.Background(), state, pod, d)
			got := dynamicresources.RequestedDeallocation(state)
			if tc.want != (got != nil) || tc.want != st.IsSuccess() {
				t.Fatalf("PostFilter = %v, deallocation %v, want %v", st, got, tc.want)
			}
			if got == nil {
				return
			}
			if got.Name != "a" || got.ResourceVersion != "3" {
				t.Errorf("deallocation %+v", got)
			}
			c := tc.a.DeepCopy()
			if !dynamicresources.NeedsDeallocation(c, pod) {
				t.Fatal("NeedsDeallocation = false")
			}
			dynamicresources.MarkDeallocation(c, pod)
			if !c.Status.DeallocationRequested || len(c.Status.ReservedFor) != 0 {
				t.Errorf("marked status %+v", c.Status)
			}
		})
	}
}

// A pod with an allocated control-plane claim reserves it with its
// binding, as a reservation only.
func TestControlPlaneClaimReservedAtBinding(t *testing.T) {
	pod := podUsing("p", "c")
	p := dynamicresources.New()
	state, d := cpRun(t, p, pod, []*resourceapi.ResourceClaim{allocatedOn(cpClaim("c"), "n2")}, nil, nil)
	if d.Selected != "n2" {
		t.Fatalf("selected %q (%v)", d.Selected, d.Status)
	}
	if st := p.Reserve(context.Background(), state, pod, "n2"); !st.IsSuccess() {
		t.Fatal(st)
	}
	b := &corev1.Binding{}
	if st := p.ContributeBinding(context.Background(), state, pod, "n2", b); !st.IsSuccess() {
		t.Fatal(st)
	}
	if len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Allocation != nil || b.ResourceClaims[0].ResourceVersion != "3" ||
		len(b.AllocationFences) != 0 {
		t.Fatalf("binding %+v", b)
	}
}

// TestReuseNeedsASignatureAndNoControlPlaneClaims (R9 in reuse.go): a
// cycle takes earlier cycles' answers only for a request with a signature
// and no claim allocated by a driver's controller.
func TestReuseNeedsASignatureAndNoControlPlaneClaims(t *testing.T) {
	prefilter := func(l dynamicresources.Lists, pod *corev1.Pod) *framework.CycleState {
		t.Helper()
		state := framework.NewCycleState()
		if st := dynamicresources.New().PreFilter(context.Background(), state, pod, snapshotOf(l, "n1")); !st.IsSuccess() && st.Code() != framework.Skip {
			t.Fatalf("PreFilter(%s) = %v", pod.Name, st.Message())
		}
		return state
	}
	versioned := func(l dynamicresources.Lists) dynamicresources.Lists {
		l.Classes[0].ResourceVersion = "3" // a signature needs versioned classes
		return l
	}
	if !dynamicresources.Reuses(prefilter(versioned(baseLists(t, claim("a", "small"))), podUsing("structured", "a"))) {
		t.Fatal("a structured claim's cycle does not reuse: the cases below prove nothing")
	}
	// An allocated claim's answers are its own: no signature.
	if dynamicresources.Reuses(prefilter(versioned(baseLists(t, onGPU(claim("a", "small"), "n1", "gpu-0"))), podUsing("allocated", "a"))) {
		t.Error("R9: a request without a signature (its claim is allocated) reuses answers")
	}
	l := versioned(baseLists(t, claim("a", "small"), cpClaim("c")))
	l.Classes = append(l.Classes, &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, DriverName: fabric, ControllerName: fabric})
	if dynamicresources.Reuses(prefilter(l, podUsing("mixed", "a", "c"))) {
		t.Error("R9: a cycle with a control-plane claim reuses answers")
	}
}
