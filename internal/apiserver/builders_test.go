package apiserver

import (
	"encoding/json"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podBuilder builds test pods: makePod("a").claim("gpu").obj().
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{p: &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}}
}

func (b *podBuilder) label(k, v string) *podBuilder {
	if b.p.Labels == nil {
		b.p.Labels = map[string]string{}
	}
	b.p.Labels[k] = v
	return b
}

func (b *podBuilder) node(n string) *podBuilder { b.p.Spec.NodeName = n; return b }

func (b *podBuilder) claim(name string) *podBuilder {
	n := name
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: &n})
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.p }

func makeClaim(name, class string) *resourcev1alpha2.ResourceClaim {
	return &resourcev1alpha2.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1alpha2", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: class},
	}
}

func makeNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
