package controller

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

var testNames = names{driver: "d.example.com", controller: "d.example.com", finalizer: Finalizer("d.example.com")}

func ourClass() *resourcev1alpha2.ResourceClass {
	return &resourcev1alpha2.ResourceClass{DriverName: "d.example.com", ControllerName: "d.example.com"}
}

// claimState builds claims for claimAction.
type claimState struct {
	c *resourcev1alpha2.ResourceClaim
}

func stateOf(mode resourcev1alpha2.AllocationMode) *claimState {
	return &claimState{&resourcev1alpha2.ResourceClaim{Spec: resourcev1alpha2.ResourceClaimSpec{AllocationMode: mode}}}
}

func (s *claimState) allocated() *claimState {
	s.c.Status.Allocation = &resourcev1alpha2.AllocationResult{}
	s.c.Status.DriverName, s.c.Status.ControllerName = "d.example.com", "d.example.com"
	return s
}

func (s *claimState) finalizer() *claimState {
	s.c.Finalizers = append(s.c.Finalizers, testNames.finalizer)
	return s
}

func (s *claimState) deleting() *claimState {
	now := metav1.Now()
	s.c.DeletionTimestamp = &now
	return s
}

func (s *claimState) deallocate() *claimState { s.c.Status.DeallocationRequested = true; return s }

func (s *claimState) reserved() *claimState {
	s.c.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	return s
}

func TestClaimAction(t *testing.T) {
	imm, wffc := resourcev1alpha2.AllocationModeImmediate, resourcev1alpha2.AllocationModeWaitForFirstConsumer
	other := &resourcev1alpha2.ResourceClass{DriverName: "d.example.com", ControllerName: "other.example.com"}
	tests := map[string]struct {
		claim *claimState
		class *resourcev1alpha2.ResourceClass
		want  action
	}{
		"immediate, ours":                           {stateOf(imm), ourClass(), actionAllocate},
		"immediate, other controller":               {stateOf(imm), other, actionNone},
		"immediate, class gone":                     {stateOf(imm), nil, actionNone},
		"immediate, allocated":                      {stateOf(imm).allocated().finalizer(), ourClass(), actionNone},
		"wait for first consumer":                   {stateOf(wffc), ourClass(), actionNone},
		"deleting, never touched":                   {stateOf(imm).deleting(), ourClass(), actionNone},
		"deleting, finalizer without allocation":    {stateOf(imm).finalizer().deleting(), ourClass(), actionDeallocate},
		"deleting, allocated":                       {stateOf(wffc).allocated().finalizer().deleting(), ourClass(), actionDeallocate},
		"deleting, reserved":                        {stateOf(wffc).allocated().finalizer().reserved().deleting(), ourClass(), actionNone},
		"deleting, class gone":                      {stateOf(wffc).allocated().finalizer().deleting(), nil, actionDeallocate},
		"deleting, allocated without our finalizer": {stateOf(wffc).allocated().deleting(), nil, actionDeallocate},
		"deallocation requested":                    {stateOf(wffc).allocated().finalizer().deallocate(), ourClass(), actionDeallocate},
		"deallocation requested, other controller":  {stateOf(wffc).allocated().finalizer().deallocate(), other, actionDeallocate},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := testNames.claimAction(tc.claim.c, tc.class); got != tc.want {
				t.Errorf("claimAction = %d, want %d", got, tc.want)
			}
		})
	}
	// Allocated by another controller, being deleted: not ours.
	c := stateOf(wffc).allocated().deleting().c
	c.Status.ControllerName = "other.example.com"
	if got := testNames.claimAction(c, nil); got != actionNone {
		t.Errorf("claim of another controller: claimAction = %d, want none", got)
	}
}

func TestNodesToCheck(t *testing.T) {
	many := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%d", prefix, i))
		}
		return out
	}
	tests := map[string]struct {
		failed           string
		potential, prior []string
		want             []string
	}{
		"potential only":           {"", []string{"a", "b"}, nil, []string{"a", "b"}},
		"prior appended once":      {"", []string{"a", "b"}, []string{"b", "c", "c"}, []string{"a", "b", "c"}},
		"failed node first":        {"x", []string{"a", "x"}, []string{"c"}, []string{"x", "a", "c"}},
		"nothing":                  {"", nil, nil, nil},
		"capped, potential before": {"", many("p", 100), many("q", 100), append(many("p", 100), many("q", 28)...)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nodesToCheck(tc.failed, tc.potential, tc.prior); !slices.Equal(got, tc.want) {
				t.Errorf("nodesToCheck = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAnswer(t *testing.T) {
	asked := []string{"a", "b", "c"}
	tests := map[string]struct {
		unsuitable []string
		failed     string
		want       []string
	}{
		"as answered":        {[]string{"b"}, "", []string{"b"}},
		"not asked dropped":  {[]string{"b", "z"}, "", []string{"b"}},
		"duplicates dropped": {[]string{"c", "c", "a"}, "", []string{"c", "a"}},
		"failed node added":  {[]string{"c"}, "a", []string{"a", "c"}},
		"failed node once":   {[]string{"a"}, "a", []string{"a"}},
		"none":               {nil, "", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := answer("e", tc.unsuitable, asked, tc.failed)
			if got.Name != "e" || !slices.Equal(got.UnsuitableNodes, tc.want) {
				t.Errorf("answer = %+v, want e with %v", got, tc.want)
			}
		})
	}
	var lots []string
	for i := range 300 {
		lots = append(lots, fmt.Sprintf("n%d", i))
	}
	if got := answer("e", lots, lots, ""); len(got.UnsuitableNodes) != resourcev1alpha2.PodSchedulingNodeListMaxSize {
		t.Errorf("answer kept %d nodes, want %d", len(got.UnsuitableNodes), resourcev1alpha2.PodSchedulingNodeListMaxSize)
	}
}

func TestMergeStatus(t *testing.T) {
	e := func(name string, nodes ...string) resourcev1alpha2.ResourceClaimSchedulingStatus {
		return resourcev1alpha2.ResourceClaimSchedulingStatus{Name: name, UnsuitableNodes: nodes}
	}
	type list = []resourcev1alpha2.ResourceClaimSchedulingStatus
	tests := map[string]struct {
		current, answers list
		ours             []string
		want             list
	}{
		"first answer":               {nil, list{e("a", "n1")}, []string{"a"}, list{e("a", "n1")}},
		"others kept in place":       {list{e("x", "n9"), e("a"), e("y")}, list{e("a", "n1")}, []string{"a"}, list{e("x", "n9"), e("a", "n1"), e("y")}},
		"allocated claim's dropped":  {list{e("a", "n1"), e("b"), e("x")}, list{e("b", "n2")}, []string{"a", "b"}, list{e("b", "n2"), e("x")}},
		"new entries appended":       {list{e("x")}, list{e("a"), e("b")}, []string{"a", "b"}, list{e("x"), e("a"), e("b")}},
		"duplicate current de-duped": {list{e("a", "n1"), e("a", "n2")}, list{e("a", "n3")}, []string{"a"}, list{e("a", "n3")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ours := map[string]bool{}
			for _, o := range tc.ours {
				ours[o] = true
			}
			if got := mergeStatus(tc.current, ours, tc.answers); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("mergeStatus = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCompleteAllocation(t *testing.T) {
	big := strings.Repeat("x", resourcev1alpha2.ResourceHandleDataMaxSize+1)
	tests := map[string]struct {
		in      *resourcev1alpha2.AllocationResult
		wantErr string
		want    []resourcev1alpha2.ResourceHandle
	}{
		"nil":              {nil, "no allocation", nil},
		"no handles":       {&resourcev1alpha2.AllocationResult{}, "", []resourcev1alpha2.ResourceHandle{{DriverName: "d.example.com"}}},
		"driver name kept": {&resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: "x.example.com", Data: "1"}, {Data: "2"}}}, "", []resourcev1alpha2.ResourceHandle{{DriverName: "x.example.com", Data: "1"}, {DriverName: "d.example.com", Data: "2"}}},
		"data too big":     {&resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{Data: big}}}, "resourceHandles[0].data: 16385 bytes", nil},
		"structured":       {&resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{StructuredData: &resourcev1alpha2.StructuredResourceHandle{}}}}, "resourceHandles[0].structuredData", nil},
		"too many handles": {&resourcev1alpha2.AllocationResult{ResourceHandles: make([]resourcev1alpha2.ResourceHandle, 33)}, "33 handles", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := completeAllocation(tc.in, "d.example.com")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.ResourceHandles, tc.want) {
				t.Fatalf("completeAllocation = %+v, %v; want handles %+v", got, err, tc.want)
			}
		})
	}
}

func TestPodClaimsAndOwnership(t *testing.T) {
	direct, generated := "direct-claim", "pod-gen-x1"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", UID: "pod-uid"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
		{Name: "a", ResourceClaimName: &direct},
		{Name: "b", ResourceClaimTemplateName: &direct},
		{Name: "c", ResourceClaimTemplateName: &direct},
	}}, Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "b", ResourceClaimName: &generated}}}}
	want := []podClaim{{entry: "a", claimName: direct}, {entry: "b", claimName: generated, generated: true}}
	if got := podClaims(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("podClaims = %+v, want %+v (c is not created yet)", got, want)
	}
	yes := true
	owned := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", UID: "pod-uid", Controller: &yes}}}
	if !ownedBy(owned, pod.UID) || ownedBy(&metav1.ObjectMeta{}, pod.UID) || ownedBy(owned, types.UID("other")) {
		t.Error("ownedBy: wrong answers")
	}
	sc := &resourcev1alpha2.PodSchedulingContext{ObjectMeta: metav1.ObjectMeta{
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", UID: "old-uid"}}}}
	if contextOfPod(sc, pod) {
		t.Error("a context owned by an earlier pod of the same name belongs to the pod")
	}
	if !contextOfPod(&resourcev1alpha2.PodSchedulingContext{}, pod) {
		t.Error("a context without owner does not belong to the pod of its name")
	}
}
