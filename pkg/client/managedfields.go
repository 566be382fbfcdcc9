package client

import (
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Leaving managedFields out. The API server tracks field ownership in every
// object's metadata.managedFields (several KB per pod). A component that
// never reads them (a scheduler, a controller, a node agent) can ask its
// informers to leave them out: Resource.WithoutManagedFields,
// WithoutManagedFields for a Factory, StripManagedFields for other
// informers.
//
// Their lists and watches ask the API server to leave the field out
// (omitManagedFieldsParam), and the decoders skip the field's JSON value
// as they meet it (skipManagedFields), so the entries are never
// allocated, whatever the server sends; anything the
// fast decoders hand to the general serializer is stripped after decoding
// instead (StripManagedFields). Objects from such an informer can be sent
// back in an Update: a nil managedFields is left out on the wire, and the
// API server then keeps the stored entries (and adds the updater's), as
// Kubernetes does; only an explicit empty list clears them.

// omitManagedFieldsParam asks allot's API server to leave managedFields
// out of a list's or watch's objects (internal/apiserver's
// OmitManagedFieldsParam): fewer bytes to send, decrypt and skip. Other
// servers ignore it, and what they send is skipped as it is decoded.
const omitManagedFieldsParam = "omitManagedFields"

// skipManagedFields is the encoding/json v2 option that decodes every
// []metav1.ManagedFieldsEntry (only ObjectMeta.ManagedFields has that type)
// as nil, skipping its JSON value without allocating it.
var skipManagedFields = jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(
	func(dec *jsontext.Decoder, v *[]metav1.ManagedFieldsEntry) error {
		*v = nil
		return dec.SkipValue()
	}))

// WithoutManagedFields returns the same client whose List and Watch leave
// metadata.managedFields out of the objects they decode (nil), for
// informers of components that never read them. Other calls are
// unchanged.
func (r *Resource[T, L]) WithoutManagedFields() *Resource[T, L] {
	cp := *r
	cp.noManagedFields = true
	return &cp
}

// StripManagedFields sets the managedFields of obj to nil, or of every item
// when obj is a list, and returns obj; other values are returned as they
// are. It is a cache.TransformFunc, for informers not built on this
// package's decoders (metadata or dynamic informers).
func StripManagedFields(obj any) (any, error) {
	ro, ok := obj.(runtime.Object)
	if !ok {
		return obj, nil
	}
	if meta.IsListType(ro) {
		err := meta.EachListItem(ro, func(item runtime.Object) error {
			_, err := StripManagedFields(item)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("strip managedFields of list items: %w", err)
		}
		return obj, nil
	}
	if acc, err := meta.Accessor(ro); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// listWithoutManagedFields decodes a list response into out with the
// managedFields skipped; a response the fast decoder does not take goes
// through the client's serializer, and its items are stripped after.
func listWithoutManagedFields(res rest.Result, out runtime.Object) error {
	raw, err := res.Raw()
	if err != nil {
		return res.Error()
	}
	if _, ok := decodeTyped(raw, out, skipManagedFields); ok {
		out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		return nil
	}
	if err := res.Into(out); err != nil {
		return err
	}
	_, err = StripManagedFields(out)
	return err
}
