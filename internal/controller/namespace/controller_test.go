package namespace

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var nsGVR = namespacesGVR

func TestNamespaceDeletionEmptiesThenRemovesTheNamespace(t *testing.T) {
	t.Parallel()
	e, cfg := startServer(t)
	e.create(crdGVR, "", widgetCRD())
	e.create(nsGVR, "", namespaceObj("doomed"))
	e.create(nsGVR, "", namespaceObj("kept"))
	e.create(podGVR, "doomed", podObj("unbound", ""))
	e.create(podGVR, "doomed", podObj("bound", "node-a"))
	e.create(claimGVR, "doomed", claimObj("c"))
	e.eventually("widgets are served", func() bool {
		_, err := e.client(widgets, "doomed").Create(e.ctx, widgetObj("w"), metav1.CreateOptions{})
		return err == nil
	})
	e.create(claimGVR, "kept", claimObj("c"))
	e.startController(cfg)

	if err := e.client(nsGVR, "").Delete(e.ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	e.eventually("the namespace's content is deleted", func() bool {
		return e.get(podGVR, "doomed", "unbound") == nil && e.get(claimGVR, "doomed", "c") == nil &&
			e.get(widgets, "doomed", "w") == nil
	})
	e.eventually("the bound pod is being deleted", func() bool {
		p := e.get(podGVR, "doomed", "bound")
		return p != nil && p.GetDeletionTimestamp() != nil
	})
	ns := e.get(nsGVR, "", "doomed")
	if ns == nil {
		t.Fatalf("namespace doomed is gone while its bound pod still terminates")
	}
	if phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase"); phase != "Terminating" {
		t.Errorf("namespace phase = %q, want Terminating", phase)
	}

	// The node agent's part: the pod has stopped, delete it for good.
	zero := int64(0)
	if err := e.client(podGVR, "doomed").Delete(e.ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete bound pod with grace 0: %v", err)
	}
	e.eventually("namespace doomed is gone", func() bool { return e.get(nsGVR, "", "doomed") == nil })
	if e.get(claimGVR, "kept", "c") == nil {
		t.Errorf("claim c in namespace kept was deleted")
	}
}

func TestNamespaceOtherFinalizersAreKept(t *testing.T) {
	t.Parallel()
	e, cfg := startServer(t)
	ns := namespaceObj("held")
	if err := unstructured.SetNestedStringSlice(ns.Object, []string{"kubernetes", "example.com/net"}, "spec", "finalizers"); err != nil {
		t.Fatal(err)
	}
	e.create(nsGVR, "", ns)
	e.create(claimGVR, "held", claimObj("c"))
	e.startController(cfg)

	if err := e.client(nsGVR, "").Delete(e.ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	e.eventually("kubernetes is removed from spec.finalizers", func() bool {
		got := e.get(nsGVR, "", "held")
		if got == nil {
			t.Fatalf("namespace held is gone although spec.finalizers holds example.com/net")
		}
		f, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "finalizers")
		return slices.Equal(f, []string{"example.com/net"})
	})
	if e.get(claimGVR, "held", "c") != nil {
		t.Errorf("claim c in namespace held still exists after finalization")
	}
}
