package namespace

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/controller/controllerutil"
)

// sync runs the deletion of one namespace as far as it can go now.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.dyn.Resource(namespacesGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.GetDeletionTimestamp() == nil || !slices.Contains(specFinalizers(ns), string(corev1.FinalizerKubernetes)) {
		return nil
	}
	if ns, err = c.markTerminating(ctx, ns); err != nil || ns == nil {
		return err
	}
	left, err := c.deleteContent(ctx, name)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("namespace %s still holds %s: %w", name, left, controllerutil.ErrWait)
	}
	return c.finalize(ctx, ns)
}

func specFinalizers(ns *unstructured.Unstructured) []string {
	f, _, _ := unstructured.NestedStringSlice(ns.Object, "spec", "finalizers")
	return f
}

// markTerminating sets status.phase Terminating. It returns the namespace
// as written, or nil if it is gone.
func (c *Controller) markTerminating(ctx context.Context, ns *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase")
	if phase == string(corev1.NamespaceTerminating) {
		return ns, nil
	}
	ns = ns.DeepCopy()
	if err := unstructured.SetNestedField(ns.Object, string(corev1.NamespaceTerminating), "status", "phase"); err != nil {
		return nil, fmt.Errorf("set phase of namespace %s: %w", ns.GetName(), err)
	}
	out, err := c.dyn.Resource(namespacesGVR).UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mark namespace %s terminating: %w", ns.GetName(), err)
	}
	return out, nil
}

// finalize removes the "kubernetes" finalizer through the finalize
// subresource; the resourceVersion of ns guards the write.
func (c *Controller) finalize(ctx context.Context, ns *unstructured.Unstructured) error {
	ns = ns.DeepCopy()
	var keep []string
	for _, f := range specFinalizers(ns) {
		if f != string(corev1.FinalizerKubernetes) {
			keep = append(keep, f)
		}
	}
	if len(keep) == 0 {
		unstructured.RemoveNestedField(ns.Object, "spec", "finalizers")
	} else if err := unstructured.SetNestedStringSlice(ns.Object, keep, "spec", "finalizers"); err != nil {
		return fmt.Errorf("set finalizers of namespace %s: %w", ns.GetName(), err)
	}
	_, err := c.dyn.Resource(namespacesGVR).Update(ctx, ns, metav1.UpdateOptions{}, "finalize")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", ns.GetName(), err)
	}
	c.log.Info("namespace emptied and finalized", "namespace", ns.GetName())
	return nil
}
