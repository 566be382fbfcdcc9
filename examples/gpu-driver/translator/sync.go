package translator

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// sync brings the translation of one GpuClaimParameters up to date. An
// error re-queues the key with backoff; problems that only a change of the
// objects can fix (an invalid spec, a conflicting object) are reported as
// events and return nil, since the change itself queues the key again.
func (t *translator) sync(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := t.vendor.GetIndexer().GetByKey(key.String())
	if err != nil {
		return fmt.Errorf("read %s %s from cache: %w", Resource, key, err)
	}
	if !exists {
		return nil // deleted: the garbage collector removes the translation
	}
	src, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("cache of %s holds a %T", Resource, obj)
	}
	if src.GetDeletionTimestamp() != nil {
		return nil
	}
	current, err := t.plist.Get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		current = nil
	} else if err != nil {
		return err
	}
	want, terr := Translate(src)
	if terr != nil {
		t.events.Eventf(src, corev1.EventTypeWarning, ReasonInvalidParameters, "%v; no ResourceClaimParameters generated", terr)
		if current != nil && ownedBy(current, src) {
			return t.remove(ctx, src, current, "its source became invalid")
		}
		return nil
	}
	switch {
	case current == nil:
		return t.create(ctx, src, want)
	case ownedBy(current, src):
		return t.update(ctx, src, current, want)
	case generatedFromPredecessor(current, src):
		// A GpuClaimParameters of the same name was deleted and created
		// again before the garbage collector removed the old translation.
		if err := t.remove(ctx, src, current, "it was generated from an earlier object of the same name"); err != nil {
			return err
		}
		return t.create(ctx, src, want)
	}
	t.events.Eventf(src, corev1.EventTypeWarning, ReasonTranslationConflict,
		"ResourceClaimParameters %s/%s exists and was not generated from this GpuClaimParameters; not overwriting it (rename one of them)",
		current.Namespace, current.Name)
	return nil
}

func (t *translator) create(ctx context.Context, src *unstructured.Unstructured, want *resourceapi.ResourceClaimParameters) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.APITimeout)
	defer cancel()
	if _, err := t.cfg.Client.ResourceClaimParameters(want.Namespace).Create(ctx, want); err != nil {
		return fmt.Errorf("create resourceclaimparameters %s/%s: %w", want.Namespace, want.Name, err)
	}
	t.log.Info("created ResourceClaimParameters", "namespace", want.Namespace, "name", want.Name, "selector", selectorOf(want))
	t.events.Eventf(src, corev1.EventTypeNormal, ReasonTranslated, "created ResourceClaimParameters %s/%s", want.Namespace, want.Name)
	return nil
}

// update writes want's generated fields over current, keeping current's
// other metadata (labels, annotations, other owners).
func (t *translator) update(ctx context.Context, src *unstructured.Unstructured, current, want *resourceapi.ResourceClaimParameters) error {
	if upToDate(current, want) {
		return nil
	}
	next := current.DeepCopy()
	next.GeneratedFrom = want.GeneratedFrom
	next.VendorParameters = want.VendorParameters
	next.Shareable = want.Shareable
	next.Requests = want.Requests
	ctx, cancel := context.WithTimeout(ctx, t.cfg.APITimeout)
	defer cancel()
	if _, err := t.cfg.Client.ResourceClaimParameters(next.Namespace).Update(ctx, next); err != nil {
		return fmt.Errorf("update resourceclaimparameters %s/%s: %w", next.Namespace, next.Name, err)
	}
	t.log.Info("updated ResourceClaimParameters", "namespace", next.Namespace, "name", next.Name, "selector", selectorOf(want))
	t.events.Eventf(src, corev1.EventTypeNormal, ReasonTranslated, "updated ResourceClaimParameters %s/%s", next.Namespace, next.Name)
	return nil
}

// remove deletes a translation, guarded by its UID so that a newer object
// of the same name is never deleted by mistake.
func (t *translator) remove(ctx context.Context, src *unstructured.Unstructured, current *resourceapi.ResourceClaimParameters, why string) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.APITimeout)
	defer cancel()
	uid := current.UID
	err := t.cfg.Client.ResourceClaimParameters(current.Namespace).Delete(ctx, current.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete resourceclaimparameters %s/%s: %w", current.Namespace, current.Name, err)
	}
	t.log.Info("deleted ResourceClaimParameters", "namespace", current.Namespace, "name", current.Name, "reason", why)
	t.events.Eventf(src, corev1.EventTypeNormal, ReasonTranslated, "deleted ResourceClaimParameters %s/%s: %s", current.Namespace, current.Name, why)
	return nil
}

// ownedBy reports whether p is src's translation: its controller is src.
func ownedBy(p *resourceapi.ResourceClaimParameters, src *unstructured.Unstructured) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.UID == src.GetUID()
}

// generatedFromPredecessor reports whether p is the translation of an
// earlier GpuClaimParameters of src's name: generated from that name and
// controlled by a GpuClaimParameters with another UID.
func generatedFromPredecessor(p *resourceapi.ResourceClaimParameters, src *unstructured.Unstructured) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.UID == src.GetUID() || ref.Kind != Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != Group {
		return false
	}
	return p.GeneratedFrom != nil && *p.GeneratedFrom == *generatedFrom(src.GetName())
}

// upToDate compares the generated fields; vendor parameters by their JSON
// value, since the server may re-encode them.
func upToDate(current, want *resourceapi.ResourceClaimParameters) bool {
	return equality.Semantic.DeepEqual(current.GeneratedFrom, want.GeneratedFrom) &&
		current.Shareable == want.Shareable &&
		equality.Semantic.DeepEqual(current.Requests, want.Requests) &&
		sameJSON(current.VendorParameters, want.VendorParameters)
}

func sameJSON(a, b *runtime.RawExtension) bool {
	if a == nil || b == nil {
		return a == b
	}
	var x, y any
	if json.Unmarshal(a.Raw, &x) != nil || json.Unmarshal(b.Raw, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// selectorOf is the selector of a translation, for the log.
func selectorOf(p *resourceapi.ResourceClaimParameters) string {
	if len(p.Requests) == 0 || p.Requests[0].Partitionable == nil || len(p.Requests[0].Partitionable.Required) == 0 {
		return ""
	}
	return p.Requests[0].Partitionable.Required[0].Selector
}
