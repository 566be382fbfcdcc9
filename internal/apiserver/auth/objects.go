package auth

import (
	"errors"
	"fmt"
	"slices"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// errNoObject is returned by as for a nil object.
var errNoObject = errors.New("no object given")

// as returns obj as a *T, converting unstructured objects.
func as[T any](obj runtime.Object) (*T, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok && u != nil {
		t := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), t); err != nil {
			return nil, fmt.Errorf("convert %s: %w", u.GetKind(), err)
		}
		return t, nil
	}
	if obj == nil {
		return nil, errNoObject
	}
	t, ok := any(obj).(*T)
	if !ok {
		return nil, fmt.Errorf("unexpected object type %T", obj)
	}
	if t == nil {
		return nil, errNoObject
	}
	return t, nil
}

// claimFinalizersOnly checks that an update of a claim's main resource
// changes at most metadata.finalizers (and fields the server owns or
// ignores there: resourceVersion, managedFields, status). Claims of both
// resource.k8s.io versions are compared alike.
func claimFinalizersOnly(a Attributes, lk Lookup) Decision {
	var old runtime.Object = a.OldObject
	if old == nil {
		c, err := lookupClaim(lk, a.Namespace, a.Name)
		if err != nil {
			return deny("%s: look up resourceclaim %s/%s: %v", a.User, a.Namespace, a.Name, err)
		}
		old = c
	}
	if a.Object == nil {
		return deny("%s: read new resourceclaim: %v", a.User, errNoObject)
	}
	if !sameBesides(old, a.Object, "finalizers") {
		return deny("%s may only change metadata.finalizers of resourceclaims, and their status through resourceclaims/status", a.User)
	}
	return Decision{Allowed: true}
}

// sameBesides reports whether two objects of one type are equal but for
// the named metadata fields, status, and what the server owns
// (resourceVersion, managedFields).
func sameBesides(a, b runtime.Object, metaFields ...string) bool {
	if a == nil || b == nil || fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
		return false
	}
	ua, errA := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	ub, errB := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if errA != nil || errB != nil {
		return false
	}
	for _, m := range []map[string]any{ua, ub} {
		delete(m, "status")
		delete(m, "apiVersion")
		delete(m, "kind")
		md, _ := m["metadata"].(map[string]any)
		for _, f := range append([]string{"resourceVersion", "managedFields"}, metaFields...) {
			delete(md, f)
		}
	}
	return equality.Semantic.DeepEqual(ua, ub)
}

// storedClaim returns the request's stored claim: OldObject, or the cache.
// A claim of resource.k8s.io/v1 is returned as the second value.
func storedClaim(a Attributes, lk Lookup) (*resourcev1alpha2.ResourceClaim, *resourcev1.ResourceClaim, error) {
	if a.OldObject != nil {
		if c, ok := a.OldObject.(*resourcev1.ResourceClaim); ok {
			return nil, c, nil
		}
		c, err := as[resourcev1alpha2.ResourceClaim](a.OldObject)
		return c, nil, err
	}
	c, err := lookupClaim(lk, a.Namespace, a.Name)
	return c, nil, err
}

// errNoLookup is returned when a rule needs a Lookup and has none.
var errNoLookup = errors.New("no lookup to read objects")

// errNotFound stands in for a Lookup that returns neither object nor error.
var errNotFound = errors.New("not found")

func lookupPod(lk Lookup, namespace, name string) (*corev1.Pod, error) {
	if lk == nil {
		return nil, errNoLookup
	}
	p, err := lk.GetPod(namespace, name)
	if err == nil && p == nil {
		err = errNotFound
	}
	return p, err
}

func lookupClaim(lk Lookup, namespace, name string) (*resourcev1alpha2.ResourceClaim, error) {
	if lk == nil {
		return nil, errNoLookup
	}
	c, err := lk.GetResourceClaim(namespace, name)
	if err == nil && c == nil {
		err = errNotFound
	}
	return c, err
}

func lookupClass(lk Lookup, name string) (*resourcev1alpha2.ResourceClass, error) {
	if lk == nil {
		return nil, errNoLookup
	}
	c, err := lk.GetResourceClass(name)
	if err == nil && c == nil {
		err = errNotFound
	}
	return c, err
}

// metadataOnlyChange reports whether an update changes nothing but
// metadata.ownerReferences, metadata.finalizers and fields the server owns
// (resourceVersion, managedFields): what the garbage collector writes.
func metadataOnlyChange(obj, old runtime.Object) bool {
	if obj == nil || old == nil {
		return false
	}
	a, errA := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	b, errB := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if errA != nil || errB != nil {
		return false
	}
	strip := func(m map[string]any) {
		md, _ := m["metadata"].(map[string]any)
		for _, f := range []string{"ownerReferences", "finalizers", "resourceVersion", "managedFields"} {
			delete(md, f)
		}
	}
	strip(a)
	strip(b)
	return equality.Semantic.DeepEqual(a, b)
}

// userClaimMarks allows a user's create or update of a claim unless it
// adds, removes or changes what only allot's components put on claims:
//
//   - the delete-protection finalizer, which the scheduler sets with a
//     structured allocation and the claim controller clears after
//     deallocating. Removing it would let a claim in use be deleted and its
//     devices handed out again while its pod runs.
//   - PodClaimNameAnnotation, which marks a claim as the one generated for
//     a pod's template entry. On a claim the user owns by another pod it
//     would hand that pod a claim the user wrote.
//
// Everything else about a claim's metadata stays the user's.
func userClaimMarks(a Attributes) Decision {
	claim, err := meta.Accessor(a.Object)
	if a.Object == nil || err != nil {
		return deny("%s: read new resourceclaim: %v", a.User, errOr(err, errNoObject))
	}
	var old metav1.Object = &metav1.ObjectMeta{}
	if a.Verb != "create" {
		if a.OldObject == nil {
			return deny("%s: read stored resourceclaim: %v", a.User, errNoObject)
		}
		if old, err = meta.Accessor(a.OldObject); err != nil {
			return deny("%s: read stored resourceclaim: %v", a.User, err)
		}
	}
	fin := resourcev1alpha2.DeleteProtectionFinalizer
	if slices.Contains(claim.GetFinalizers(), fin) != slices.Contains(old.GetFinalizers(), fin) {
		return deny("%s may not add or remove the finalizer %s of resourceclaims: the scheduler sets it with a structured allocation and the claim controller clears it after deallocation",
			a.User, fin)
	}
	ann := resourcev1alpha2.PodClaimNameAnnotation
	v, ok := claim.GetAnnotations()[ann]
	ov, ook := old.GetAnnotations()[ann]
	if v != ov || ok != ook {
		return deny("%s may not set, change or remove the annotation %s of resourceclaims: it marks claims the claim controller generates from pods' templates",
			a.User, ann)
	}
	return allow("%s may write namespaced objects", a.User)
}

func errOr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// extendedResourceClaimWrite lets the scheduler create, and delete after a
// failed binding, the claims it makes for pods' extended resources served
// by DRA: claims annotated resource.kubernetes.io/extended-resource-claim
// "true" whose controller is a pod.
func extendedResourceClaimWrite(a Attributes) Decision {
	obj := a.Object
	if a.Verb == "delete" {
		obj = a.OldObject
	}
	if obj == nil {
		return deny("%s may %s only resourceclaims made for pods' extended resources: %v", a.User, a.Verb, errNoObject)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return deny("%s: read resourceclaim: %v", a.User, err)
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if m.GetAnnotations()[corev1.ExtendedResourceClaimAnnotation] != "true" || ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" {
		return deny("%s may %s only resourceclaims made for pods' extended resources (annotation %s: \"true\", a pod as controller)",
			a.User, a.Verb, corev1.ExtendedResourceClaimAnnotation)
	}
	return allow("%s may %s the claim of a pod's extended resources", a.User, a.Verb)
}
