package resourceclaim

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// podBuilder builds test pods: makePod("p").template("gpu", "t").obj().
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}
}

func (b *podBuilder) template(entry, tmpl string) *podBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: &tmpl})
	return b
}

func (b *podBuilder) claim(entry, claim string) *podBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimName: &claim})
	return b
}

func (b *podBuilder) recorded(entry string, claim *string) *podBuilder {
	b.p.Status.ResourceClaimStatuses = append(b.p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: claim})
	return b
}

func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder { b.p.Status.Phase = p; return b }

func (b *podBuilder) unprepared(s corev1.ConditionStatus) *podBuilder {
	b.p.Status.Conditions = append(b.p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResourceClaimsUnprepared, Status: s})
	return b
}

func (b *podBuilder) deleting() *podBuilder {
	now := metav1.Now()
	b.p.DeletionTimestamp = &now
	return b
}

func (b *podBuilder) uid(u types.UID) *podBuilder { b.p.UID = u; return b }

func (b *podBuilder) obj() *corev1.Pod { return b.p }

func ptr(s string) *string { return &s }

func TestClaimsToCreate(t *testing.T) {
	tests := map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"no claims":              {makePod("p").obj(), nil},
		"direct claim only":      {makePod("p").claim("a", "c").obj(), nil},
		"template unrecorded":    {makePod("p").template("a", "t").claim("b", "c").obj(), []string{"a"}},
		"template recorded":      {makePod("p").template("a", "t").recorded("a", ptr("p-a-x")).obj(), nil},
		"recorded as not needed": {makePod("p").template("a", "t").recorded("a", nil).obj(), nil},
		"two, one recorded":      {makePod("p").template("a", "t").template("b", "t").recorded("a", ptr("x")).obj(), []string{"b"}},
		"terminal":               {makePod("p").template("a", "t").phase(corev1.PodSucceeded).obj(), nil},
		"failed":                 {makePod("p").template("a", "t").phase(corev1.PodFailed).obj(), nil},
		"being deleted":          {makePod("p").template("a", "t").deleting().obj(), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, rc := range ClaimsToCreate(tc.pod) {
				got = append(got, rc.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ClaimsToCreate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReservationObsolete(t *testing.T) {
	ref := resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: "uid-p"}
	tests := map[string]struct {
		ref  resourcev1alpha2.ResourceClaimConsumerReference
		pod  *corev1.Pod
		want bool
	}{
		"pod gone":                     {ref, nil, true},
		"pod replaced":                 {ref, makePod("p").uid("uid-new").obj(), true},
		"running":                      {ref, makePod("p").phase(corev1.PodRunning).obj(), false},
		"succeeded, still prepared":    {ref, makePod("p").phase(corev1.PodSucceeded).obj(), false},
		"failed, unprepare pending":    {ref, makePod("p").phase(corev1.PodFailed).unprepared(corev1.ConditionFalse).obj(), false},
		"succeeded and unprepared":     {ref, makePod("p").phase(corev1.PodSucceeded).unprepared(corev1.ConditionTrue).obj(), true},
		"running with stray condition": {ref, makePod("p").phase(corev1.PodRunning).unprepared(corev1.ConditionTrue).obj(), false},
		"being deleted, running":       {ref, makePod("p").phase(corev1.PodRunning).deleting().obj(), false},
		"not a pod":                    {resourcev1alpha2.ResourceClaimConsumerReference{APIGroup: "example.com", Resource: "jobs", Name: "p"}, nil, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ReservationObsolete(tc.ref, tc.pod); got != tc.want {
				t.Fatalf("ReservationObsolete = %v, want %v", got, tc.want)
			}
		})
	}
}

// claimBuilder builds test claims: makeClaim("c").allocated().reserved("p").obj().
type claimBuilder struct {
	c *resourcev1alpha2.ResourceClaim
}

func makeClaim(name string) *claimBuilder {
	return &claimBuilder{&resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu", AllocationMode: resourcev1alpha2.AllocationModeWaitForFirstConsumer}}}
}

// allocated gives the claim a structured allocation and its finalizer.
func (b *claimBuilder) allocated() *claimBuilder {
	b.c.Status.Allocation = &resourcev1alpha2.AllocationResult{}
	b.c.Status.DriverName = "gpu.example.com"
	return b.finalizer()
}

func (b *claimBuilder) finalizer() *claimBuilder {
	b.c.Finalizers = append(b.c.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer)
	return b
}

func (b *claimBuilder) reserved(pod string) *claimBuilder {
	b.c.Status.ReservedFor = append(b.c.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: types.UID("uid-" + pod)})
	return b
}

func (b *claimBuilder) immediate() *claimBuilder {
	b.c.Spec.AllocationMode = resourcev1alpha2.AllocationModeImmediate
	return b
}

func (b *claimBuilder) controller(name string) *claimBuilder {
	b.c.Status.ControllerName = name
	return b
}

func (b *claimBuilder) deleting() *claimBuilder {
	now := metav1.Now()
	b.c.DeletionTimestamp = &now
	return b
}

func (b *claimBuilder) obj() *resourcev1alpha2.ResourceClaim { return b.c }

func TestShouldDeallocate(t *testing.T) {
	controlPlane := &resourcev1alpha2.ResourceClass{ControllerName: "ctrl.example.com"}
	tests := map[string]struct {
		claim          *resourcev1alpha2.ResourceClaim
		class          *resourcev1alpha2.ResourceClass
		dealloc, unfin bool
	}{
		"unused, wait for first consumer": {makeClaim("c").allocated().obj(), nil, true, false},
		"default allocation mode": {func() *resourcev1alpha2.ResourceClaim {
			c := makeClaim("c").allocated().obj()
			c.Spec.AllocationMode = ""
			return c
		}(), nil, true, false},
		"reserved":                      {makeClaim("c").allocated().reserved("p").obj(), nil, false, false},
		"immediate stays allocated":     {makeClaim("c").immediate().allocated().obj(), nil, false, false},
		"immediate being deleted":       {makeClaim("c").immediate().allocated().deleting().obj(), nil, true, false},
		"reserved being deleted":        {makeClaim("c").allocated().reserved("p").deleting().obj(), nil, false, false},
		"not allocated, finalizer left": {makeClaim("c").finalizer().obj(), nil, false, true},
		"not allocated, no finalizer":   {makeClaim("c").obj(), nil, false, false},
		"control-plane class":           {makeClaim("c").allocated().obj(), controlPlane, false, false},
		"control-plane status":          {makeClaim("c").allocated().controller("ctrl.example.com").obj(), nil, false, false},
		"structured class":              {makeClaim("c").allocated().obj(), &resourcev1alpha2.ResourceClass{}, true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ShouldDeallocate(tc.claim, tc.class); got != tc.dealloc {
				t.Errorf("ShouldDeallocate = %v, want %v", got, tc.dealloc)
			}
			if got := ShouldRemoveFinalizer(tc.claim, tc.class); got != tc.unfin {
				t.Errorf("ShouldRemoveFinalizer = %v, want %v", got, tc.unfin)
			}
		})
	}
}

func TestShouldRequestDeallocation(t *testing.T) {
	controlPlane := &resourcev1alpha2.ResourceClass{ControllerName: "ctrl.example.com"}
	for name, tc := range map[string]struct {
		claim *resourcev1alpha2.ResourceClaim
		class *resourcev1alpha2.ResourceClass
		want  bool
	}{
		"unused control-plane claim":     {makeClaim("c").allocated().controller("ctrl.example.com").obj(), nil, true},
		"control-plane class":            {makeClaim("c").allocated().obj(), controlPlane, true},
		"reserved":                       {makeClaim("c").allocated().controller("x").reserved("p").obj(), nil, false},
		"immediate stays allocated":      {makeClaim("c").immediate().allocated().controller("x").obj(), nil, false},
		"structured is deallocated here": {makeClaim("c").allocated().obj(), nil, false},
		"not allocated":                  {makeClaim("c").controller("x").obj(), nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ShouldRequestDeallocation(tc.claim, tc.class); got != tc.want {
				t.Errorf("ShouldRequestDeallocation = %v, want %v", got, tc.want)
			}
		})
	}
}
