package dra

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
					l.Claims = append(l.Claims, &list.Items[i])
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
