package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deleteObject deletes the object as it was judged: the uid and
// resourceVersion of live are preconditions, so a changed object is judged
// again instead.
func (c *Collector) deleteObject(ctx context.Context, ref objectRef, live *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	uid, rv := live.UID, live.ResourceVersion
	opts := metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	}
	err := c.meta.Resource(ref.GVR).Namespace(ref.Namespace).Delete(ctx, ref.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	return nil
}

// removeOwnerRefs drops the references to owners from the object, guarded
// by the resourceVersion it was judged by.
func (c *Collector) removeOwnerRefs(ctx context.Context, ref objectRef, live *metav1.PartialObjectMetadata, owners []types.UID) error {
	var keep []metav1.OwnerReference
	for _, o := range live.OwnerReferences {
		if !slices.Contains(owners, o.UID) {
			keep = append(keep, o)
		}
	}
	if err := c.patchMeta(ctx, ref, live.ResourceVersion, "ownerReferences", keep); err != nil {
		return fmt.Errorf("remove owner references: %w", err)
	}
	return nil
}

// removeFinalizer drops one finalizer from the object, guarded by the
// resourceVersion it was judged by. Without finalizers left the server
// deletes the object.
func (c *Collector) removeFinalizer(ctx context.Context, ref objectRef, live *metav1.PartialObjectMetadata, finalizer string) error {
	if !slices.Contains(live.Finalizers, finalizer) {
		return nil
	}
	var keep []string
	for _, f := range live.Finalizers {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	if err := c.patchMeta(ctx, ref, live.ResourceVersion, "finalizers", keep); err != nil {
		return fmt.Errorf("remove finalizer %s: %w", finalizer, err)
	}
	return nil
}

// patchMeta sets one metadata field with a JSON merge patch (a nil value
// removes it). The resourceVersion in the patch is a precondition: the
// server answers 409 Conflict when the object changed since.
//
// It goes through the dynamic client because the server answers a write
// that deletes the object (the last finalizer gone) with a Status, which
// the metadata client would refuse to decode.
func (c *Collector) patchMeta(ctx context.Context, ref objectRef, rv, field string, value any) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv, field: value},
	})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = c.dyn.Resource(ref.GVR).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch %s: %w", ref, err)
	}
	return nil
}
