package translator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// TestClassify: which existing ResourceClaimParameters the translator
// updates (its own), replaces (an earlier namesake's) or leaves alone.
func TestClassify(t *testing.T) {
	src := gpuParams("p").uid("new").obj()
	yes, no := true, false
	owner := func(apiVersion, kind string, uid types.UID, controller *bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "p", UID: uid, Controller: controller}}
	}
	ours := Group + "/" + Version
	tests := map[string]struct {
		owners      []metav1.OwnerReference
		gen         *resourceapi.ResourceClaimParametersReference
		owned, prev bool
	}{
		"ours":                          {owners: owner(ours, Kind, "new", &yes), gen: generatedFrom("p"), owned: true},
		"ours, generatedFrom edited":    {owners: owner(ours, Kind, "new", &yes), owned: true},
		"an earlier namesake's":         {owners: owner(ours, Kind, "old", &yes), gen: generatedFrom("p"), prev: true},
		"earlier, but other source":     {owners: owner(ours, Kind, "old", &yes), gen: generatedFrom("q")},
		"earlier, not the controller":   {owners: owner(ours, Kind, "old", &no), gen: generatedFrom("p")},
		"controlled by another kind":    {owners: owner(ours, "Other", "old", &yes), gen: generatedFrom("p")},
		"controlled from another group": {owners: owner("other.example.com/v1", Kind, "old", &yes), gen: generatedFrom("p")},
		"a user's":                      {},
		"a user's, claiming our name":   {gen: generatedFrom("p")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: tc.owners}, GeneratedFrom: tc.gen}
			if got := ownedBy(p, src); got != tc.owned {
				t.Errorf("ownedBy = %v, want %v", got, tc.owned)
			}
			if got := generatedFromPredecessor(p, src); got != tc.prev {
				t.Errorf("generatedFromPredecessor = %v, want %v", got, tc.prev)
			}
		})
	}
}
