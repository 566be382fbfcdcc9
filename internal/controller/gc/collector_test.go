package gc

import (
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestBackgroundDeletionCollectsDependents(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	p := e.create(pod("p"))
	c := e.create(claim("c").ownedBy(p))
	e.create(claim("c-child").ownedBy(c)) // a dependent of a dependent
	k := e.create(class("k"))
	e.create(claim("owned-by-class").ownedBy(k)) // a cluster-scoped owner

	e.delete(podGVR, "p", "") // unbound: deleted at once
	e.eventuallyGone(claimGVR, "c")
	e.eventuallyGone(claimGVR, "c-child")
	if e.get(claimGVR, "owned-by-class") == nil {
		t.Fatalf("claim owned-by-class was deleted while its owner exists")
	}
	e.delete(classGVR, "k", metav1.DeletePropagationBackground)
	e.eventuallyGone(claimGVR, "owned-by-class")
}

func TestGoneOwnerReferenceIsRemovedWhenAnotherOwnerExists(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	p1 := e.create(pod("p1"))
	p2 := e.create(pod("p2"))
	e.create(claim("c").ownedBy(p1).ownedBy(p2))

	e.delete(podGVR, "p1", "")
	e.eventually("claim c references only p2", func() bool {
		c := e.get(claimGVR, "c")
		if c == nil {
			t.Fatalf("claim c was deleted although p2 owns it")
		}
		return slices.Equal(ownerUIDs(c), []types.UID{p2.GetUID()})
	})
}

func TestOrphanPropagationKeepsDependents(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	p := e.create(pod("p"))
	e.create(claim("c").ownedBy(p).blocking())
	other := e.create(pod("other"))
	e.create(claim("c2").ownedBy(p).ownedBy(other))

	e.delete(podGVR, "p", metav1.DeletePropagationOrphan)
	e.eventuallyGone(podGVR, "p") // the collector removed the orphan finalizer
	c := e.get(claimGVR, "c")
	if c == nil {
		t.Fatalf("claim c was deleted; orphan propagation must keep it")
	}
	if refs := ownerUIDs(c); len(refs) != 0 {
		t.Errorf("claim c still has owner references %v", refs)
	}
	c2 := e.get(claimGVR, "c2")
	if c2 == nil || !slices.Equal(ownerUIDs(c2), []types.UID{other.GetUID()}) {
		t.Errorf("claim c2 = %v, want it to reference only pod other", c2)
	}
}

func TestForegroundDeletionDeletesDependentsFirst(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	p := e.create(pod("p"))
	// A blocking dependent held by a finalizer keeps the owner waiting.
	e.create(claim("held").ownedBy(p).blocking().finalizers("example.com/hold"))
	e.create(claim("plain").ownedBy(p))

	e.delete(podGVR, "p", metav1.DeletePropagationForeground)
	e.eventually("claim held is being deleted", func() bool {
		c := e.get(claimGVR, "held")
		return c != nil && c.GetDeletionTimestamp() != nil
	})
	e.eventuallyGone(claimGVR, "plain")
	owner := e.get(podGVR, "p")
	if owner == nil || !slices.Contains(owner.GetFinalizers(), finalizerForeground) {
		t.Fatalf("pod p = %v; want it kept with finalizer %s while a blocking dependent exists", owner, finalizerForeground)
	}

	e.patchFinalizers(claimGVR, "held", nil)
	e.eventuallyGone(claimGVR, "held")
	e.eventuallyGone(podGVR, "p")
}

func TestForegroundDeletionCascadesThroughDependentsOfDependents(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	p := e.create(pod("p"))
	c := e.create(claim("c").ownedBy(p).blocking())
	e.create(claim("grandchild").ownedBy(c).blocking().finalizers("example.com/hold"))

	e.delete(podGVR, "p", metav1.DeletePropagationForeground)
	// c has a dependent, so it is deleted in the foreground too and
	// waits for the grandchild, and p waits for c.
	e.eventually("the grandchild is being deleted", func() bool {
		g := e.get(claimGVR, "grandchild")
		return g != nil && g.GetDeletionTimestamp() != nil
	})
	mid := e.get(claimGVR, "c")
	if mid == nil || !slices.Contains(mid.GetFinalizers(), finalizerForeground) {
		t.Fatalf("claim c = %v; want it kept with finalizer %s while its dependent exists", mid, finalizerForeground)
	}
	if e.get(podGVR, "p") == nil {
		t.Fatalf("pod p is gone while its dependent c exists")
	}

	e.patchFinalizers(claimGVR, "grandchild", nil)
	e.eventuallyGone(claimGVR, "grandchild")
	e.eventuallyGone(claimGVR, "c")
	e.eventuallyGone(podGVR, "p")
}

func TestDependentOfRecreatedOwnerIsCollected(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	p := e.create(pod("p"))
	// "stale" names pod p, but with the uid of an earlier pod of that name.
	e.create(claim("stale").ownedByUID(p, "5b3a3c8e-0000-4000-8000-000000000000"))
	e.create(claim("current").ownedBy(p))

	e.eventuallyGone(claimGVR, "stale")
	if e.get(claimGVR, "current") == nil {
		t.Fatalf("claim current was deleted while its owner exists")
	}
}

func TestCustomResourceOwner(t *testing.T) {
	t.Parallel()
	e := startCollector(t)
	// The CRD is created after the collector started: it must re-discover.
	e.create(&object{gvr: crdGVR, u: widgetCRD()})
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	var w *unstructured.Unstructured
	e.eventually("widgets are served", func() bool {
		var err error
		w, err = e.client(widgets, true).Create(e.ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		}}, metav1.CreateOptions{})
		return err == nil
	})
	e.create(claim("c").ownedBy(w))

	if err := e.client(widgets, true).Delete(e.ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete widget: %v", err)
	}
	e.eventuallyGone(claimGVR, "c")
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func widgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

func ownerUIDs(u *unstructured.Unstructured) []types.UID {
	var out []types.UID
	for _, r := range u.GetOwnerReferences() {
		out = append(out, r.UID)
	}
	return out
}

// patchFinalizers sets an object's finalizers with a merge patch.
func (e *env) patchFinalizers(gvr schema.GroupVersionResource, name string, finalizers []string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers}})
	if err != nil {
		e.t.Fatalf("encode patch: %v", err)
	}
	if _, err := e.client(gvr, namespaced(gvr)).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patch finalizers of %s %s: %v", gvr.Resource, name, err)
	}
}
