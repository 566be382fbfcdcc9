package client_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
)

func TestDynamicCustomResource(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	group := uniqueName("dyn") + ".example.com"
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: boolPtr(true),
				}},
			}},
		},
	}
	if _, err := c.CustomResourceDefinitions().Create(ctx, crd); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	gv := schema.GroupVersion{Group: group, Version: "v1"}
	eventually(t, "widgets in discovery", func() bool {
		res, err := c.Discovery().ServerResourcesForGroupVersion(gv.String())
		return err == nil && len(res.APIResources) > 0
	})
	ns := newNamespace(t, c)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(), "kind": "Widget",
		"metadata": map[string]any{"name": "w1"}, "spec": map[string]any{"size": int64(3)},
	}}
	res := c.Dynamic().Resource(gv.WithResource("widgets")).Namespace(ns)
	if _, err := res.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create widget: %v", err)
	}
	got, err := res.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get widget: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Fatalf("spec.size = %d", size)
	}
}

func boolPtr(b bool) *bool { return &b }

func TestMetadataClient(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	if _, err := c.Pods(ns).Create(ctx, makePod("m").label("app", "meta").obj()); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	list, err := c.Metadata().Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list metadata: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "m" || list.Items[0].Labels["app"] != "meta" {
		t.Fatalf("metadata list = %+v", list.Items)
	}
}

// TestMetadataWatchBookmark: a metadata watch's BOOKMARK carries a
// PartialObjectMetadata, which the metadata client can decode (an event of
// the resource's own kind would end the watch with a decoding error).
func TestMetadataWatchBookmark(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	if _, err := c.Pods(ns).Create(ctx, makePod("m").obj()); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	yes := true
	w, err := c.Metadata().Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ns).Watch(ctx, metav1.ListOptions{
		SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatalf("metadata watch: %v", err)
	}
	defer w.Stop()
	for _, want := range []watch.EventType{watch.Added, watch.Bookmark} {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s", want)
			}
			m, isMeta := ev.Object.(*metav1.PartialObjectMetadata)
			if ev.Type != want || !isMeta {
				t.Fatalf("event %s %#v, want %s of a PartialObjectMetadata", ev.Type, ev.Object, want)
			}
			if want == watch.Bookmark && (m.ResourceVersion == "" || m.Annotations[metav1.InitialEventsAnnotationKey] != "true") {
				t.Fatalf("bookmark %+v, want a resourceVersion and the end-of-initial-events annotation", m.ObjectMeta)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event", want)
		}
	}
}
