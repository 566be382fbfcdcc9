package apiserver

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"allot.dev/allot/internal/storage"
)

// kind describes one served resource: its names, scope, and the hooks that
// differ per kind.
type kind struct {
	gvk        schema.GroupVersionKind
	resource   string // plural, lowercase
	singular   string
	shortNames []string
	categories []string
	namespaced bool
	hasStatus  bool
	// onCreate says what a create does with the status the client sent.
	// Every kind with a status subresource must choose (registry.add
	// panics otherwise): a forgotten choice would let any creator write
	// what only the status subresource's writers may.
	onCreate statusOnCreate

	newObj func() runtime.Object

	// prepareCreate fills server-side defaults and the status a new object
	// starts with, after onCreate has dealt with the client's status.
	prepareCreate func(obj runtime.Object)
	// prepareUpdate carries over from old what a main-resource update may
	// not change (status).
	prepareUpdate func(obj, old runtime.Object)
	validate      func(obj runtime.Object) field.ErrorList
	validateUpd   func(obj, old runtime.Object) field.ErrorList
	validateStat  func(obj, old runtime.Object) field.ErrorList
	// fields are the values usable in field selectors, besides
	// metadata.name and metadata.namespace.
	fields func(obj runtime.Object) fields.Set
	// viewFields, when set, are the sibling's fields of the view of an
	// object of this kind, computed without building the view (the watch
	// cache computes them on every write: siblingFields).
	viewFields func(obj runtime.Object) fields.Set
	// lightDecode, when set, extracts labels and fields for the watch
	// cache without decoding the whole object (and records where its
	// managedFields are, as decoderFor does).
	lightDecode func(stored []byte) (storage.Decoded, error)
	// columns and row produce `get` tables.
	columns []column
	row     func(obj runtime.Object) []any

	// sibling is the same group and resource served in another version,
	// sharing its storage (see versions.go); nil for most kinds.
	sibling *kind

	// crd is set for custom resources.
	crd    *apiextv1.CustomResourceDefinition
	schema *apiextv1.JSONSchemaProps

	// fm holds the kind's field managers (fieldmanager.go), set by
	// registry.add.
	fm *fieldManagers
}

// statusOnCreate is a kind's rule for the status in a create's body.
type statusOnCreate int

const (
	// statusUnchosen is the zero value: no choice made, refused for kinds
	// with a status subresource.
	statusUnchosen statusOnCreate = iota
	// dropStatusOnCreate resets status before defaulting, as Kubernetes'
	// create strategies do: status is written through the status
	// subresource (or pods/binding) by the components allowed to.
	dropStatusOnCreate
	// keepStatusOnCreate stores the status the creator sent. Only Node
	// uses it: a node agent registers its Node with its capacity and
	// conditions, and only the node itself (or an admin) may create it.
	keepStatusOnCreate
)

// checkKind reports a kind that may not be served as it is.
func checkKind(k *kind) error {
	if k.hasStatus && k.onCreate == statusUnchosen {
		return fmt.Errorf("kind %s has a status subresource but no onCreate choice: set dropStatusOnCreate or keepStatusOnCreate", k.gvk)
	}
	return nil
}

// resetStatus zeroes the status of a typed object (its Status field) or
// removes it from a custom resource.
func resetStatus(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		delete(u.Object, "status")
		return
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	if st := v.Elem().FieldByName("Status"); st.IsValid() && st.CanSet() {
		st.Set(reflect.Zero(st.Type()))
	}
}

func (k *kind) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.gvk.Group, Resource: k.resource}
}

// registry holds the served kinds. Built-in kinds are fixed; custom
// resources come and go with their CRDs.
type registry struct {
	mu         sync.RWMutex
	byResource map[schema.GroupVersionResource]*kind
}

func newRegistry() *registry {
	return &registry{byResource: map[schema.GroupVersionResource]*kind{}}
}

func (r *registry) add(k *kind) {
	if err := checkKind(k); err != nil {
		panic(err)
	}
	if k.fm == nil {
		k.fm = &fieldManagers{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byResource[k.gvk.GroupVersion().WithResource(k.resource)] = k
}

func (r *registry) remove(gvr schema.GroupVersionResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byResource, gvr)
}

func (r *registry) get(gvr schema.GroupVersionResource) *kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byResource[gvr]
}

// byKind finds a kind by group, version and Kind.
func (r *registry) byKind(gvk schema.GroupVersionKind) *kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.byResource {
		if k.gvk == gvk {
			return k
		}
	}
	return nil
}

// all returns the kinds sorted by group, version (preferred first),
// resource.
func (r *registry) all() []*kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*kind, 0, len(r.byResource))
	for _, k := range r.byResource {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.gvk.Group != b.gvk.Group {
			return a.gvk.Group < b.gvk.Group
		}
		if a.gvk.Version != b.gvk.Version {
			// The preferred version first, as Kubernetes orders them:
			// GA before beta before alpha, then newer first.
			return version.CompareKubeAwareVersionStrings(a.gvk.Version, b.gvk.Version) > 0
		}
		return a.resource < b.resource
	})
	return out
}

// groupVersions returns the served group versions, core first, each
// group's preferred version before its others.
func (r *registry) groupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, k := range r.all() {
		gv := k.gvk.GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	return out
}

// storageKey is where an object lives in etcd.
func (k *kind) storageKey(namespace, name string) string {
	return k.prefix() + keyTail(k.namespaced, namespace, name)
}

// prefix is the etcd prefix of every object of the kind.
func (k *kind) prefix() string {
	g := k.gvk.Group
	if g == "" {
		g = "core"
	}
	return "/registry/" + g + "/" + k.resource + "/"
}

func (k *kind) nsPrefix(namespace string) string {
	if !k.namespaced || namespace == "" {
		return k.prefix()
	}
	return k.prefix() + namespace + "/"
}

func keyTail(namespaced bool, namespace, name string) string {
	if namespaced {
		return namespace + "/" + name
	}
	return name
}

// lowerKind is the lowercase kind name used in discovery singular names.
func lowerKind(k string) string { return strings.ToLower(k) }
