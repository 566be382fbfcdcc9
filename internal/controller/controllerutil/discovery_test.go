package controllerutil

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// fakeDiscoverer answers with fixed documents.
type fakeDiscoverer struct {
	groups []*metav1.APIGroup
	lists  []*metav1.APIResourceList
	err    error
}

func (f fakeDiscoverer) ServerGroupsAndResourcesWithContext(context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return f.groups, f.lists, f.err
}

func group(name, preferred string) *metav1.APIGroup {
	return &metav1.APIGroup{Name: name, PreferredVersion: metav1.GroupVersionForDiscovery{Version: preferred}}
}

func list(gv string, res ...metav1.APIResource) *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: res}
}

func res(name, kind string, verbs ...string) metav1.APIResource {
	return metav1.APIResource{Name: name, Kind: kind, Namespaced: true, Verbs: verbs}
}

func TestDiscoverAndPreferredVersions(t *testing.T) {
	d := fakeDiscoverer{
		groups: []*metav1.APIGroup{group("", "v1"), group("example.com", "v2")},
		lists: []*metav1.APIResourceList{
			list("v1", res("pods", "Pod", "list", "watch", "delete"), res("pods/status", "Pod", "get")),
			list("example.com/v2", res("widgets", "Widget", "list")),
			list("example.com/v1", res("widgets", "Widget", "list"), res("gadgets", "Gadget", "list")),
		},
	}
	all, err := Discover(context.Background(), d)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(all) != 4 {
		t.Fatalf("Discover found %d resources, want 4 (no subresources): %+v", len(all), all)
	}
	got := map[schema.GroupResource]string{}
	for _, r := range PreferredVersions(all) {
		got[r.GVR.GroupResource()] = r.GVR.Version
	}
	want := map[schema.GroupResource]string{
		{Resource: "pods"}: "v1", {Group: "example.com", Resource: "widgets"}: "v2", {Group: "example.com", Resource: "gadgets"}: "v1",
	}
	if len(got) != len(want) {
		t.Fatalf("PreferredVersions = %v, want %v", got, want)
	}
	for gr, v := range want {
		if got[gr] != v {
			t.Errorf("PreferredVersions: %s in %q, want %q", gr, got[gr], v)
		}
	}
	if pods := all[0]; !pods.Supports("list", "delete") || pods.Supports("deletecollection") {
		t.Errorf("pods.Supports: verbs %v misread", pods.Verbs)
	}
}

func TestDiscoverPartial(t *testing.T) {
	d := fakeDiscoverer{
		groups: []*metav1.APIGroup{group("", "v1")},
		lists:  []*metav1.APIResourceList{list("v1", res("pods", "Pod", "list"))},
		err:    &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "broken", Version: "v1"}: errors.New("boom")}},
	}
	all, err := Discover(context.Background(), d)
	if !errors.Is(err, ErrPartialDiscovery) {
		t.Fatalf("Discover error = %v, want ErrPartialDiscovery", err)
	}
	if len(all) != 1 {
		t.Errorf("Discover found %d resources, want the 1 that could be read", len(all))
	}
	d.err = errors.New("connection refused")
	if _, err := Discover(context.Background(), d); err == nil || errors.Is(err, ErrPartialDiscovery) {
		t.Errorf("Discover error = %v, want a complete failure", err)
	}
}
