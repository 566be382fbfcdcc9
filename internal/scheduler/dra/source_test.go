package dra

import (
	"strconv"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
)

// racingIndexer is an Indexer whose first List has a claim event arrive
// right after the list was taken: the store gets the claim and the source
// hears of it, but the list returned does not have it.
type racingIndexer struct {
	toolscache.Indexer
	once  sync.Once
	event func()
}

func (r *racingIndexer) List() []any {
	out := r.Indexer.List()
	r.once.Do(r.event)
	return out
}

func newIndexer() toolscache.Indexer {
	return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
}

func testClaim(name string, rv int) *resourcev1alpha2.ResourceClaim {
	return &resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: strconv.Itoa(rv)}}
}

// TestFenceIsReadBeforeTheStores: the Objects' revision (the fence a
// binding sends, the allocation revision its decisions are complete up
// to) is read before the stores. A claim event that lands while they are
// read is then above the fence whether the read saw the claim or not;
// read after, the fence would cover a claim the decisions never saw, and
// the binding that relies on it would not be refused.
func TestFenceIsReadBeforeTheStores(t *testing.T) {
	claims := newIndexer()
	if err := claims.Add(testClaim("a", 5)); err != nil {
		t.Fatal(err)
	}
	d := &source{}
	late := testClaim("late", 9)
	racing := &racingIndexer{Indexer: claims, event: func() {
		if err := claims.Add(late); err != nil {
			t.Error(err)
		}
		d.touch(late)
	}}
	d.Claims = client.NewLister[*resourcev1alpha2.ResourceClaim](racing, resourcev1alpha2.Resource("resourceclaims"))
	d.Slices = client.NewLister[*resourcev1alpha2.NodeResourceSlice](newIndexer(), resourcev1alpha2.Resource("noderesourceslices"))
	d.Classes = client.NewLister[*resourcev1alpha2.ResourceClass](newIndexer(), resourcev1alpha2.Resource("resourceclasses"))
	d.ClassParameters = client.NewLister[*resourcev1alpha2.ResourceClassParameters](newIndexer(), resourcev1alpha2.Resource("resourceclassparameters"))
	d.ClaimParameters = client.NewLister[*resourcev1alpha2.ResourceClaimParameters](newIndexer(), resourcev1alpha2.Resource("resourceclaimparameters"))
	d.Contexts = client.NewLister[*resourcev1alpha2.PodSchedulingContext](newIndexer(), resourcev1alpha2.Resource("podschedulingcontexts"))
	d.touch(testClaim("a", 5))

	objs, err := d.objects()
	if err != nil {
		t.Fatal(err)
	}
	fence, _ := strconv.Atoi(objs.Revision())
	if _, seen := objs.Claim("default", "late"); !seen && fence >= 9 {
		t.Fatalf("fence %d covers claim late (resourceVersion 9), which the Objects do not have: the fence was read after the stores", fence)
	}
	if fence != 5 {
		t.Fatalf("fence %d, want 5: the highest claim resourceVersion heard of before the read", fence)
	}
	// The late event is not lost: the next Objects apply it.
	next, err := d.objects()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next.Claim("default", "late"); !ok || next.Revision() != "9" {
		t.Fatalf("next Objects: claim late present %v, fence %s; want the late claim and fence 9", ok, next.Revision())
	}
}
