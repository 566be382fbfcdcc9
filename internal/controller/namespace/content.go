package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/controller/controllerutil"
)

// remaining counts, per resource, the objects left in a namespace.
type remaining map[string]int

func (r remaining) String() string {
	parts := make([]string, 0, len(r))
	for res, n := range r {
		parts = append(parts, fmt.Sprintf("%d %s", n, res))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// deleteContent deletes every object in the namespace and reports, per
// resource, how many objects remain (being deleted gracefully, or held by
// finalizers). An incomplete discovery is an error, so the caller never
// finalizes a namespace it may not have emptied.
func (c *Controller) deleteContent(ctx context.Context, ns string) (remaining, error) {
	res, discErr := controllerutil.Discover(ctx, c.discovery)
	if discErr != nil && !errors.Is(discErr, controllerutil.ErrPartialDiscovery) {
		return nil, discErr
	}
	left := remaining{}
	errs := []error{discErr}
	for _, r := range controllerutil.PreferredVersions(res) {
		if !r.Namespaced || !r.Supports("list") || !(r.Supports("delete") || r.Supports("deletecollection")) {
			continue
		}
		n, err := c.deleteResource(ctx, r, ns)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			left[r.GVR.GroupResource().String()] = n
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("delete content of namespace %s: %w", ns, err)
	}
	return left, nil
}

// deleteResource deletes the objects of one resource in the namespace and
// returns how many remain.
func (c *Controller) deleteResource(ctx context.Context, r controllerutil.Resource, ns string) (int, error) {
	client := c.meta.Resource(r.GVR).Namespace(ns)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	collected := false
	if r.Supports("deletecollection") {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case err == nil:
			collected = true
		case !apierrors.IsMethodNotSupported(err) && !apierrors.IsNotFound(err):
			return 0, fmt.Errorf("delete collection of %s: %w", r.GVR.Resource, err)
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil // the resource went away (its CRD was deleted)
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", r.GVR.Resource, err)
	}
	if collected || !r.Supports("delete") {
		return len(list.Items), nil
	}
	for _, it := range list.Items {
		if it.DeletionTimestamp != nil {
			continue
		}
		uid := it.UID
		o := opts
		o.Preconditions = &metav1.Preconditions{UID: &uid}
		if err := client.Delete(ctx, it.Name, o); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("delete %s %s: %w", r.GVR.Resource, it.Name, err)
		}
	}
	return len(list.Items), nil
}
