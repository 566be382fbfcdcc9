package v1

import (
	"slices"
	"testing"
)

func TestResourceClaimNames(t *testing.T) {
	named, tmpl, generated := "shared", "gpu-tmpl", "p-gpu-x"
	pod := &Pod{
		Spec: PodSpec{ResourceClaims: []PodResourceClaim{
			{Name: "a", ResourceClaimName: &named},
			{Name: "gpu", ResourceClaimTemplateName: &tmpl},
			{Name: "late", ResourceClaimTemplateName: &tmpl},
		}},
		Status: PodStatus{ResourceClaimStatuses: []PodResourceClaimStatus{
			{Name: "late"}, // recorded as needing no claim
			{Name: "gpu", ResourceClaimName: &generated},
		}},
	}
	if got, want := pod.ResourceClaimNames(), []string{"shared", "p-gpu-x"}; !slices.Equal(got, want) {
		t.Fatalf("ResourceClaimNames() = %v, want %v", got, want)
	}
	pod.Status.ExtendedResourceClaimStatus = &PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-x",
		RequestMappings: []ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	if got, want := pod.ResourceClaimNames(), []string{"shared", "p-gpu-x", "p-extended-resources-x"}; !slices.Equal(got, want) {
		t.Fatalf("ResourceClaimNames() with an extended-resource claim = %v, want %v", got, want)
	}
	if !(&Pod{Status: PodStatus{ExtendedResourceClaimStatus: pod.Status.ExtendedResourceClaimStatus}}).UsesResourceClaims() || (&Pod{}).UsesResourceClaims() {
		t.Fatal("UsesResourceClaims: want true with only an extended-resource claim, false with none")
	}
	if got := (&Pod{}).ResourceClaimNames(); got != nil {
		t.Fatalf("a pod without claims: %v", got)
	}
}
