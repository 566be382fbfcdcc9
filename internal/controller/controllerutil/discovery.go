package controllerutil

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// ErrPartialDiscovery is wrapped by Discover's error when some group
// versions could not be read.
var ErrPartialDiscovery = errors.New("some group versions could not be discovered")

// Discoverer reads the server's discovery documents
// (*discovery.DiscoveryClient is one).
type Discoverer interface {
	ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
}

// Resource is one served resource (never a subresource) in one version.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Verbs      []string
	// Preferred is set in the group's preferred version.
	Preferred bool
}

// GVK is the resource's group, version and kind.
func (r Resource) GVK() schema.GroupVersionKind { return r.GVR.GroupVersion().WithKind(r.Kind) }

// Supports reports whether every one of verbs is served.
func (r Resource) Supports(verbs ...string) bool {
	for _, v := range verbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}

// Discover lists every resource in every served version. When some group
// versions could not be read it returns the others together with an error
// wrapping ErrPartialDiscovery: callers must not conclude that the
// resources of the failed groups are gone.
func Discover(ctx context.Context, d Discoverer) ([]Resource, error) {
	groups, lists, err := d.ServerGroupsAndResourcesWithContext(ctx)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	var out []Resource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			out = append(out, Resource{
				GVR:        gv.WithResource(r.Name),
				Kind:       r.Kind,
				Namespaced: r.Namespaced,
				Verbs:      r.Verbs,
				Preferred:  preferred[gv.Group] == gv.Version,
			})
		}
	}
	if err != nil {
		return out, fmt.Errorf("discover resources: %w: %w", ErrPartialDiscovery, err)
	}
	return out, nil
}

// PreferredVersions keeps one version of every group and resource: the
// group's preferred version when it serves the resource, else the first
// version discovery listed.
func PreferredVersions(res []Resource) []Resource {
	idx := map[schema.GroupResource]int{}
	var out []Resource
	for _, r := range res {
		gr := r.GVR.GroupResource()
		i, seen := idx[gr]
		switch {
		case !seen:
			idx[gr] = len(out)
			out = append(out, r)
		case r.Preferred && !out[i].Preferred:
			out[i] = r
		}
	}
	return out
}
