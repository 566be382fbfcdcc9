package allocator

import (
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

func templatePod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
}

func TestGeneratedClaimName(t *testing.T) {
	a, b := templatePod("web"), templatePod("web")
	a.UID, b.UID = "uid-a", "uid-b"
	if GeneratedClaimName(a, "gpu") == GeneratedClaimName(b, "gpu") || GeneratedClaimName(a, "gpu") == GeneratedClaimName(a, "nic") {
		t.Fatal("pods of one name, or entries of one pod, share a generated claim name")
	}
	if GeneratedClaimName(a, "gpu") != GeneratedClaimName(a, "gpu") {
		t.Fatal("the generated name is not the same for the same pod and entry")
	}
	if n := GeneratedClaimName(a, "gpu"); !strings.HasPrefix(n, "web-gpu-") || len(n) != len("web-gpu-")+5 {
		t.Fatalf("generated name %q, want web-gpu-XXXXX", n)
	}
	long := templatePod(strings.Repeat("p", 253))
	if n := GeneratedClaimName(long, strings.Repeat("e", 63)); len(n) != 253 || len(validation.IsDNS1123Subdomain(n)) > 0 {
		t.Fatalf("generated name of %d characters for a long pod name", len(n))
	}
}

func TestNewClaimFromTemplate(t *testing.T) {
	pod := templatePod("web")
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"},
				Finalizers: []string{"f"}, GenerateName: "g-"},
			Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "gpu-class",
				ParametersRef: &resourceapi.ResourceClaimParametersReference{Kind: "ResourceClaimParameters", Name: "p"}},
		}}
	c := NewClaimFromTemplate(pod, "gpu", tmpl, "web-gpu-x")
	switch {
	case c.Name != "web-gpu-x" || c.GenerateName != "" || c.Namespace != "ns":
		t.Fatalf("name %q/%q generateName %q", c.Namespace, c.Name, c.GenerateName)
	case c.Labels["l"] != "1" || c.Annotations["a"] != "2" || c.Annotations[resourceapi.PodClaimNameAnnotation] != "gpu":
		t.Fatalf("metadata not copied: %v %v", c.Labels, c.Annotations)
	case len(c.Finalizers) != 0:
		t.Fatalf("the template's other metadata was copied: finalizers %v", c.Finalizers)
	case c.Spec.ResourceClassName != "gpu-class" || c.Spec.ParametersRef == nil || c.Spec.ParametersRef == tmpl.Spec.Spec.ParametersRef:
		t.Fatalf("spec not copied deeply: %+v", c.Spec)
	case !IsPodClaim(c, pod, "gpu") || IsPodClaim(c, pod, "other") || IsPodClaim(c, templatePod("other"), "gpu"):
		t.Fatal("IsPodClaim misjudges the generated claim")
	}
	uid, entry, ok := resourceapi.GeneratedFor(c)
	if !ok || uid != pod.UID || entry != "gpu" {
		t.Fatalf("GeneratedFor = %q, %q, %v: the API server and scheduler would not know the claim as the pod's", uid, entry, ok)
	}
	if ref := c.OwnerReferences[0]; ref != PodOwnerReference(pod) && (!*ref.Controller || !*ref.BlockOwnerDeletion || ref.Kind != "Pod" || ref.UID != pod.UID) {
		t.Fatalf("owner reference %+v", ref)
	}
	if tmpl.Spec.Annotations[resourceapi.PodClaimNameAnnotation] != "" {
		t.Fatal("the template's annotations were modified")
	}
}

func TestPodOwnerReference(t *testing.T) {
	ref := PodOwnerReference(templatePod("web"))
	if ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name != "web" || ref.UID != "uid-web" ||
		ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("owner reference %+v", ref)
	}
}

// TestGenerateClaimsAsTheController: the simulation's generated claim is
// the claim controller's (NewClaimFromTemplate) but for its name, so the
// API server and the scheduler know it as the pod's (GeneratedFor); a
// simulated pod without a UID gets a claim that passes for no pod's.
func TestGenerateClaimsAsTheController(t *testing.T) {
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"l": "1"}},
			Spec:       resourceapi.ResourceClaimSpec{ResourceClassName: "gpu-class"},
		}}
	pod := templatePod("web")
	tmplName := "t"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmplName}}
	sim := NewSimulation(&Snapshot{ClaimTemplates: []*resourceapi.ResourceClaimTemplate{tmpl}}, Options{})
	out := sim.GenerateClaims(pod)
	if len(out.Status.ResourceClaimStatuses) != 1 || *out.Status.ResourceClaimStatuses[0].ResourceClaimName != "web-gpu" {
		t.Fatalf("recorded claims %+v, want web-gpu", out.Status.ResourceClaimStatuses)
	}
	got, ok := sim.Claim("ns", "web-gpu")
	if !ok {
		t.Fatal("no claim web-gpu")
	}
	if uid, entry, ok := resourceapi.GeneratedFor(got); !ok || uid != pod.UID || entry != "gpu" {
		t.Fatalf("GeneratedFor(simulated claim) = %q %q %v: not known as the pod's", uid, entry, ok)
	}
	want := NewClaimFromTemplate(pod, "gpu", tmpl, "web-gpu")
	if got.Name != want.Name || got.Namespace != want.Namespace || !maps.Equal(got.Labels, want.Labels) ||
		!maps.Equal(got.Annotations, want.Annotations) || got.Spec.ResourceClassName != want.Spec.ResourceClassName ||
		len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != pod.UID || !*got.OwnerReferences[0].Controller {
		t.Fatalf("simulated claim\n %+v\nwant the controller's\n %+v", got.ObjectMeta, want.ObjectMeta)
	}

	anon := templatePod("anon")
	anon.UID = ""
	anon.Spec.ResourceClaims = pod.Spec.ResourceClaims
	sim.GenerateClaims(anon)
	if c, _ := sim.Claim("ns", "anon-gpu"); c == nil {
		t.Fatal("no claim for the pod without a UID")
	} else if _, _, ok := resourceapi.GeneratedFor(c); ok {
		t.Fatal("the claim of a pod without a UID passes for a generated claim of some pod")
	}
}
