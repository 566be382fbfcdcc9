package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// plantStored writes obj straight into etcd under its kind's key, as an
// older server that did not check a rule would have stored it, and waits
// until the API server reads it.
func plantStored(t *testing.T, resource, ns, name string, obj runtime.Object, path string) {
	t.Helper()
	k := testAPI.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, resource))
	data, err := encodeForStorage(k, obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testStore.Create(context.Background(), k.storageKey(ns, name), data); err != nil {
		t.Fatalf("plant %s: %v", path, err)
	}
	// The watch cache learns of the write through its watch.
	eventually(t, 10*time.Second, "GET "+path, func() (bool, string) {
		r := admin(t, http.MethodGet, path, nil)
		return r.code == http.StatusOK, r.String()
	})
}

// storedMeta is the metadata an API server gives an object it creates.
func storedMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("planted-%s-%s", ns, name)),
		CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second))}
}

func seedSliceWith(name, node string, attrs ...resourcev1alpha2.Attribute) *resourcev1alpha2.NodeResourceSlice {
	return &resourcev1alpha2.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1alpha2.NodeResourceSliceSpec{NodeName: node, DriverName: "gpu.example.com",
			NodeResourceModel: resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{
				ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "gpu-0", Attributes: attrs}}}}}}
}

func stringAttr(name, v string) resourcev1alpha2.Attribute {
	return resourcev1alpha2.Attribute{Name: name, AttributeValue: resourcev1alpha2.AttributeValue{String: &v}}
}

// TestSeedSliceReservedAttribute: seed 002 reserves attribute names with a
// ".k8s.io" suffix for Kubernetes. A NodeResourceSlice publishing one is
// refused with 422 naming the attribute; one stored before the rule stays
// readable, writable with the names it has, and deletable.
func TestSeedSliceReservedAttribute(t *testing.T) {
	const slices = "/apis/resource.k8s.io/v1alpha2/noderesourceslices"
	expect(t, admin(t, http.MethodPost, slices, seedSliceWith("reserved-new", "n-reserved", stringAttr("model", "a4"), stringAttr("topology.k8s.io", "x"))),
		http.StatusUnprocessableEntity, "spec.partitionable.resourceInstances[0].attributes[1].name", `\"topology.k8s.io\"`, "reserved for standardization by Kubernetes")
	expect(t, admin(t, http.MethodGet, slices+"/reserved-new", nil), http.StatusNotFound)
	expect(t, admin(t, http.MethodPost, slices, seedSliceWith("reserved-like", "n-reserved", stringAttr("myk8s.io", "x"))), http.StatusCreated)

	old := seedSliceWith("reserved-old", "n-reserved-old", stringAttr("topology.k8s.io", "x"))
	old.ObjectMeta = storedMeta("", old.Name)
	path := slices + "/" + old.Name
	plantStored(t, "noderesourceslices", "", old.Name, old, path)

	var got resourcev1alpha2.NodeResourceSlice
	admin(t, http.MethodGet, path, nil).into(t, &got)
	got.Labels = map[string]string{"kept": "yes"}
	expect(t, admin(t, http.MethodPut, path, &got), http.StatusOK, `"kept":"yes"`, `"topology.k8s.io"`)
	admin(t, http.MethodGet, path, nil).into(t, &got)
	attrs := &got.Spec.Partitionable.ResourceInstances[0].Attributes
	*attrs = append(*attrs, stringAttr("pcie.k8s.io", "y"))
	expect(t, admin(t, http.MethodPut, path, &got), http.StatusUnprocessableEntity, "spec.partitionable.resourceInstances[0].attributes[1].name", `\"pcie.k8s.io\"`)
	*attrs = []resourcev1alpha2.Attribute{stringAttr("topology.example.com", "x")}
	expect(t, admin(t, http.MethodPut, path, &got), http.StatusOK, `"topology.example.com"`)
	expect(t, admin(t, http.MethodDelete, path, nil), http.StatusOK)
	expect(t, admin(t, http.MethodDelete, slices+"/reserved-like", nil), http.StatusOK)
}

// TestSeedClaimTemplateMetadata: seed 000 lets a claim template's metadata
// carry only labels and annotations. A v1alpha2 template with any other
// field there is refused with 422 naming it; one stored before the rule
// stays readable, updatable (kept as it is or fixed) and deletable.
func TestSeedClaimTemplateMetadata(t *testing.T) {
	ns := newNamespace(t)
	templates := path2(ns, "resourceclaimtemplates")
	tmpl := func(name string, meta metav1.ObjectMeta) *resourcev1alpha2.ResourceClaimTemplate {
		return &resourcev1alpha2.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1alpha2.ResourceClaimTemplateSpec{ObjectMeta: meta, Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"}}}
	}
	expect(t, admin(t, http.MethodPost, templates, tmpl("named", metav1.ObjectMeta{Name: "claim", Labels: map[string]string{"a": "b"}})),
		http.StatusUnprocessableEntity, "spec.metadata.name", "only `labels` and `annotations` may be set")
	expect(t, admin(t, http.MethodPost, templates, tmpl("finalized", metav1.ObjectMeta{Finalizers: []string{"example.com/keep"}})),
		http.StatusUnprocessableEntity, "spec.metadata.finalizers")
	expect(t, admin(t, http.MethodGet, templates+"/named", nil), http.StatusNotFound)
	expect(t, admin(t, http.MethodPost, templates, tmpl("labeled", metav1.ObjectMeta{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}})),
		http.StatusCreated)

	old := tmpl("legacy", metav1.ObjectMeta{Name: "claim", Finalizers: []string{"example.com/keep"}, Labels: map[string]string{"a": "b"}})
	old.ObjectMeta = storedMeta(ns, old.Name)
	old.Spec.Spec.AllocationMode = resourcev1alpha2.AllocationModeWaitForFirstConsumer
	path := templates + "/legacy"
	plantStored(t, "resourceclaimtemplates", ns, old.Name, old, path)

	var got resourcev1alpha2.ResourceClaimTemplate
	admin(t, http.MethodGet, path, nil).into(t, &got)
	if got.Spec.Name != "claim" || len(got.Spec.Finalizers) != 1 {
		t.Fatalf("stored template reads back as %+v", got.Spec.ObjectMeta)
	}
	got.Labels = map[string]string{"relabeled": "yes"}
	expect(t, admin(t, http.MethodPut, path, &got), http.StatusOK, `"relabeled":"yes"`)
	admin(t, http.MethodGet, path, nil).into(t, &got)
	got.Spec.Name = "another"
	expect(t, admin(t, http.MethodPut, path, &got), http.StatusUnprocessableEntity, "spec.metadata.name")
	got.Spec.Name, got.Spec.Finalizers = "", nil
	expect(t, admin(t, http.MethodPut, path, &got), http.StatusOK)
	admin(t, http.MethodGet, path, nil).into(t, &got)
	if want := (metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}); got.Spec.Name != "" || got.Spec.Finalizers != nil || got.Spec.Labels["a"] != "b" {
		t.Errorf("fixed template's spec.metadata %+v, want %+v", got.Spec.ObjectMeta, want)
	}
	expect(t, admin(t, http.MethodDelete, path, nil), http.StatusOK)
	expect(t, admin(t, http.MethodGet, path, nil), http.StatusNotFound)
}
