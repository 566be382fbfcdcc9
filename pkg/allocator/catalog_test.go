package allocator_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

func catalogClaimParams(ns, name string, from *resourceapi.ResourceClaimParametersReference) *resourceapi.ResourceClaimParameters {
	return &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, GeneratedFrom: from}
}

// The catalog's lookups are scenarios (testdata/scenarios/seed-catalog.txt).

// Inputs are the lists the catalog was built from, for callers that reuse
// it while they are unchanged.
func TestCatalogInputs(t *testing.T) {
	s := &allocator.Snapshot{
		Classes:         []*resourceapi.ResourceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}},
		ClaimParameters: []*resourceapi.ResourceClaimParameters{catalogClaimParams("default", "small", nil)},
		Claims:          []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "c"}}},
	}
	in := allocator.NewCatalog(s).Inputs()
	if &in.Classes[0] != &s.Classes[0] || &in.ClaimParameters[0] != &s.ClaimParameters[0] || in.Claims != nil || in.Nodes != nil {
		t.Errorf("Inputs = %+v, want the snapshot's classes and parameters only", in)
	}
}
