package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// specChanged decides a main-resource update's new generation: any field
// but metadata and status counts, compared semantically.
func TestSpecChanged(t *testing.T) {
	base := makePod("p").node("n1").obj()
	base.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	class := &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, DriverName: "d.example.com"}
	for _, tc := range []struct {
		name     string
		obj, old runtime.Object
		want     bool
	}{
		{"same", base.DeepCopy(), base, false},
		{"metadata only", with(base, func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"}; p.ResourceVersion = "9" }), base, false},
		{"status only", with(base, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), base, false},
		{"spec field", with(base, func(p *corev1.Pod) { p.Spec.NodeName = "n2" }), base, true},
		{"nested spec field", with(base, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "other" }), base, true},
		{"nil and empty slice", with(base, func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{} }), base, false},
		{"same quantity written differently", with(base, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1024Mi")
		}), base, false},
		{"top-level field of a kind without spec", &resourcev1alpha2.ResourceClass{ObjectMeta: class.ObjectMeta, DriverName: "other.example.com"}, class, true},
		{"kind without spec, metadata only", &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 3}, DriverName: "d.example.com"}, class, false},
		{"unstructured spec", &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"a": int64(1)}}},
			&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"a": int64(2)}}}, true},
		{"unstructured status", &unstructured.Unstructured{Object: map[string]any{"spec": "x", "status": "y"}},
			&unstructured.Unstructured{Object: map[string]any{"spec": "x", "status": "z"}}, false},
	} {
		if got := specChanged(tc.obj, tc.old); got != tc.want {
			t.Errorf("%s: specChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func with(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod {
	p = p.DeepCopy()
	f(p)
	return p
}
