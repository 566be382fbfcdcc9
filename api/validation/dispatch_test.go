package validation

import (
	"testing"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestDispatch checks that every kind reaches its validation: an object
// without a name fails with metadata.name, in Validate and ValidateUpdate.
func TestDispatch(t *testing.T) {
	for name, obj := range map[string]runtime.Object{
		"Namespace":               &corev1.Namespace{},
		"Node":                    &corev1.Node{},
		"Pod":                     &corev1.Pod{Spec: makePod("a").obj().Spec},
		"Event":                   &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "a"}},
		"ResourceQuota":           &corev1.ResourceQuota{},
		"Binding":                 &corev1.Binding{Target: corev1.ObjectReference{Name: "n"}},
		"ResourceClass":           &resourcev1alpha2.ResourceClass{DriverName: "d.example.com"},
		"ResourceClaim":           &resourcev1alpha2.ResourceClaim{Spec: makeClaim("a").obj().Spec},
		"ResourceClaimTemplate":   &resourcev1alpha2.ResourceClaimTemplate{Spec: resourcev1alpha2.ResourceClaimTemplateSpec{Spec: makeClaim("a").obj().Spec}},
		"PodSchedulingContext":    &resourcev1alpha2.PodSchedulingContext{},
		"NodeResourceSlice":       &resourcev1alpha2.NodeResourceSlice{Spec: makeSlice("a").obj().Spec},
		"ResourceClaimParameters": &resourcev1alpha2.ResourceClaimParameters{},
		"ResourceClassParameters": &resourcev1alpha2.ResourceClassParameters{},
		"Unstructured":            &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{}}},
	} {
		t.Run(name, func(t *testing.T) {
			expectErrs(t, Validate(obj), "metadata.name: Required")
			expectErrs(t, ValidateUpdate(obj, obj.DeepCopyObject()), "metadata.name: Required")
		})
	}
	crd := makeCRD().with(func(c *apiextv1.CustomResourceDefinition) { c.Name = "" }).obj()
	expectErrs(t, Validate(crd), "metadata.name: Required")
}

func TestDispatchStatusAndDefault(t *testing.T) {
	withStatus := []runtime.Object{
		&corev1.Namespace{}, &corev1.Node{}, &corev1.Pod{}, &corev1.ResourceQuota{},
		&resourcev1alpha2.ResourceClaim{}, &resourcev1alpha2.PodSchedulingContext{}, &apiextv1.CustomResourceDefinition{},
	}
	for _, obj := range withStatus {
		expectErrs(t, ValidateStatusUpdate(obj, obj.DeepCopyObject()), "metadata.name: Required")
	}
	expectErrs(t, ValidateStatusUpdate(&corev1.Event{}, &corev1.Event{}), "status: Not found")

	pod, claim, ns := makePod("a").obj(), makeClaim("c").obj(), &corev1.Namespace{}
	crd := makeCRD().obj()
	for _, obj := range []runtime.Object{pod, claim, ns, crd, &corev1.Event{}, nil} {
		Default(obj)
	}
	if pod.Spec.RestartPolicy == "" || claim.Spec.AllocationMode == "" || ns.Status.Phase == "" || crd.Spec.Names.ListKind == "" {
		t.Errorf("Default did not reach every kind: %q %q %q %q", pod.Spec.RestartPolicy, claim.Spec.AllocationMode, ns.Status.Phase, crd.Spec.Names.ListKind)
	}
}

func TestDispatchRejectsOddInput(t *testing.T) {
	var nilPod *corev1.Pod
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"unknown type":   {errs: Validate(&metav1.Status{}), want: []string{"kind: no validation for this type"}},
		"nil":            {errs: Validate(nil), want: []string{"kind"}},
		"typed nil":      {errs: Validate(nilPod), want: []string{"kind"}},
		"update nil old": {errs: ValidateUpdate(makePod("a").obj(), nil), want: []string{"kind"}},
		"kind changes":   {errs: ValidateUpdate(makePod("a").obj(), &corev1.Node{}), want: []string{"kind: may not change the kind"}},
		"status kind":    {errs: ValidateStatusUpdate(makePod("a").obj(), &corev1.Node{}), want: []string{"kind"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}
