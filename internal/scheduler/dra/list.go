package dra

import (
	"context"
	"fmt"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/client"
)

// List lists the DRA objects for scheduler.ListSnapshot, each List with its own
// timeout. Vendor parameter objects are not listed; allocations then
// snapshot the parameters' vendorParameters.
func List(ctx context.Context, c *client.Client, timeout time.Duration) (*dynamicresources.Objects, error) {
	var l dynamicresources.Lists
	steps := []struct {
		what string
		fn   func(context.Context) error
	}{
		{"resource claims", func(ctx context.Context) error {
			list, err := c.ResourceClaims("").List(ctx, metav1.ListOptions{})
			if err == nil {
				l.Revision = list.ResourceVersion
				for i := range list.Items {
					if !resourcev1alpha2.IsView(&list.Items[i]) { // v1 claims come from their own list
						l.Claims = append(l.Claims, &list.Items[i])
					}
				}
			}
			return err
		}},
		{"node resource slices", func(ctx context.Context) error {
			list, err := c.NodeResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.Slices = append(l.Slices, &list.Items[i])
			}
			return nil
		}},
		{"resource classes", func(ctx context.Context) error {
			list, err := c.ResourceClasses().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.Classes = append(l.Classes, &list.Items[i])
			}
			return nil
		}},
		{"resource class parameters", func(ctx context.Context) error {
			list, err := c.ResourceClassParameters().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.ClassParameters = append(l.ClassParameters, &list.Items[i])
			}
			return nil
		}},
		{"resource claim parameters", func(ctx context.Context) error {
			list, err := c.ResourceClaimParameters("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.ClaimParameters = append(l.ClaimParameters, &list.Items[i])
			}
			return nil
		}},
		{"resource.k8s.io/v1 claims", func(ctx context.Context) error {
			list, err := c.ResourceClaimsV1("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				if !resourcev1alpha2.IsView(&list.Items[i]) {
					l.V1Claims = append(l.V1Claims, &list.Items[i])
				}
			}
			l.Revision = maxRV(l.Revision, list.ResourceVersion)
			return nil
		}},
		{"resource slices", func(ctx context.Context) error {
			list, err := c.ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.V1Slices = append(l.V1Slices, &list.Items[i])
			}
			return nil
		}},
		{"device classes", func(ctx context.Context) error {
			list, err := c.DeviceClasses().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.DeviceClasses = append(l.DeviceClasses, &list.Items[i])
			}
			return nil
		}},
		{"device taint rules", func(ctx context.Context) error {
			list, err := c.DeviceTaintRules().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.TaintRules = append(l.TaintRules, &list.Items[i])
			}
			return nil
		}},
		{"namespaces", func(ctx context.Context) error {
			list, err := c.Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			l.AdminNamespaces = map[string]bool{}
			for _, ns := range list.Items {
				if ns.Labels[resourcev1.DRAAdminNamespaceLabelKey] == "true" {
					l.AdminNamespaces[ns.Name] = true
				}
			}
			return nil
		}},
		{"pod scheduling contexts", func(ctx context.Context) error {
			list, err := c.PodSchedulingContexts("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				l.Contexts = append(l.Contexts, &list.Items[i])
			}
			return nil
		}},
	}
	for _, st := range steps {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		err := st.fn(lctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", st.what, err)
		}
	}
	return dynamicresources.NewObjects(l), nil
}

// maxRV is the larger of two resourceVersions.
func maxRV(a, b string) string {
	if parseRV(b) > parseRV(a) {
		return b
	}
	return a
}
