package apiserver

import (
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A create's managedFields, as the field manager writes them, are one
// entry {manager, Update, apiVersion, time, FieldsV1} whose FieldsV1 is
// the set of fields the new object has: which fields are present, not
// their values, but for the values inside lists (the keys of associative
// lists, k:{...}; the members of sets, v:...; the indices of atomic
// lists' elements). Creates come in families of one shape (a
// ReplicaSet's or Job's pods, the controllers' Events, a benchmark's
// pods), so the field manager's comparison of an empty object with the
// new one, by reflection, is done once per shape: createMemo remembers,
// per kind and manager, the answer for a few objects, and a create whose
// object has the same shape as one of them (sameShape) gets that answer
// with the time the field manager would have written
// (time.Now().UTC(), managedFieldsUpdater).
//
// The shape rule (sameShape) is stricter than what the field set depends
// on, never looser:
//
//   - same Go type at every step (for unstructured objects and interface
//     values, the same dynamic type);
//   - a plain scalar (string, number, bool) outside a list: both zero or
//     both non-zero (a zero field left out by omitempty is absent, a
//     non-zero one present; a field always written is present either way);
//   - pointers and interfaces both nil, or both non-nil and the same shape;
//   - structs: every exported field (and embedded struct) the same shape;
//   - maps: both nil or both non-nil, the same keys, each value the same
//     shape;
//   - slices and arrays (lists, and []byte) and everything inside them:
//     equal (strictEqual, reflect.DeepEqual's rule: a nil and an empty
//     list differ);
//   - a type that marshals itself (json.Marshaler, which the field
//     manager's reflection asks for its value) or says itself when it is
//     zero (omitzero asks it): equal, but for metav1.Time and MicroTime
//     (null when zero, else a string), resource.Quantity (always a string)
//     and intstr.IntOrString (a number or a string), which are always a
//     leaf field: both zero or both non-zero (and IntOrString's type the
//     same).
//
// The memo answers only creates that carry no managedFields of their own
// (those decide the starting set) and no last-applied-configuration
// annotation, and remembers only answers of exactly one entry (an object
// whose fields are all stripped, or a failed comparison, gets none, and is
// left to the field manager every time). A manager whose last creates
// all missed (more than 2×memoShapes lookups) stores one miss in
// memoStoreEvery only: claims made from a template, each owned by
// another pod, never share a shape (the owner's uid is a list key), and
// would otherwise pay a copy per create for nothing.
// TestCreateMemoAgreesWithTheFieldManager, TestCreateMemoCustomResources
// and FuzzCreateMemo compare its answers with the field manager's own.

const (
	// memoShapes is how many shapes the memo keeps per kind and manager;
	// a new one replaces the oldest.
	memoShapes = 4
	// memoManagers bounds the managers the memo keeps per kind; past it
	// the memo starts over.
	memoManagers = 64
)

// lastAppliedAnnotation is kubectl's client-side apply record, which the
// field manager reads on apply.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// createMemo is one kind's memo of the field manager's answers for creates.
type createMemo struct {
	mu        sync.RWMutex
	byManager map[string]*memoShapeRing
}

type memoShapeRing struct {
	entries [memoShapes]*memoEntry // immutable once stored
	next    int
	// misses counts the lookups since the last hit: a family whose
	// objects never share a shape (claims owned by one pod each: the
	// owner's uid is a list key) stops paying a copy per create.
	misses atomic.Int32
}

// memoStoreEvery is how often a manager whose last lookups all missed
// (more than twice memoShapes) still stores a shape.
const memoStoreEvery = 32

// memoEntry is the field manager's answer for one object (without its
// managedFields): its managedFields entry, time aside.
type memoEntry struct {
	shape runtime.Object
	entry metav1.ManagedFieldsEntry
}

// trackCreate records a create's managedFields as trackUpdate with an
// empty live object does, from the memo when an object of the same shape
// was created by the same manager before.
func (s *Server) trackCreate(k *kind, obj runtime.Object, manager string) (runtime.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil || k.fm == nil || len(acc.GetManagedFields()) > 0 || acc.GetAnnotations()[lastAppliedAnnotation] != "" {
		return s.trackUpdate(k, "", k.newObj(), obj, manager)
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	m := &k.fm.creates
	if e := m.lookup(manager, obj); e != nil {
		entry := *e.entry.DeepCopy()
		entry.Time = &metav1.Time{Time: time.Now().UTC()}
		acc.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
		return obj, nil
	}
	out, err := s.trackUpdate(k, "", k.newObj(), obj, manager)
	if err != nil {
		return nil, err
	}
	if oacc, err := meta.Accessor(out); err == nil && len(oacc.GetManagedFields()) == 1 && m.worthStoring(manager) {
		shape := out.DeepCopyObject()
		if sacc, err := meta.Accessor(shape); err == nil {
			sacc.SetManagedFields(nil)
			m.store(manager, &memoEntry{shape: shape, entry: *oacc.GetManagedFields()[0].DeepCopy()})
		}
	}
	return out, nil
}

// lookup returns the remembered answer of manager for an object of
// obj's shape, or nil.
func (m *createMemo) lookup(manager string, obj runtime.Object) *memoEntry {
	var cands [memoShapes]*memoEntry
	m.mu.RLock()
	r := m.byManager[manager]
	if r != nil {
		cands = r.entries
	}
	m.mu.RUnlock()
	for _, e := range cands {
		if e != nil && sameShape(shapeValue(e.shape), shapeValue(obj)) {
			if r.misses.Load() != 0 {
				r.misses.Store(0)
			}
			return e
		}
	}
	if r != nil {
		r.misses.Add(1)
	}
	return nil
}

// worthStoring says whether a miss of manager's should store its shape:
// always while the manager's creates hit, or missed a few times only;
// then one miss in memoStoreEvery, so that a new family still gets in.
func (m *createMemo) worthStoring(manager string) bool {
	m.mu.RLock()
	r := m.byManager[manager]
	m.mu.RUnlock()
	if r == nil {
		return true
	}
	n := r.misses.Load()
	return n <= 2*memoShapes || n%memoStoreEvery == 0
}

// shapeValue is what the field manager reads of obj: an unstructured
// object's map (Unstructured marshals itself, so sameShape would compare
// it whole), else the object.
func shapeValue(obj runtime.Object) reflect.Value {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return reflect.ValueOf(u.Object)
	}
	return reflect.ValueOf(obj)
}

func (m *createMemo) store(manager string, e *memoEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.byManager[manager]
	if r == nil {
		if m.byManager == nil || len(m.byManager) >= memoManagers {
			m.byManager = map[string]*memoShapeRing{}
		}
		r = &memoShapeRing{}
		m.byManager[manager] = r
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % memoShapes
}

// shapeClass says how sameShape compares a type's values.
type shapeClass uint8

const (
	byKind   shapeClass = iota // by its reflect.Kind (see sameShape)
	strict                     // equal (strictEqual)
	leafZero                   // a leaf either way: zero-ness (IsZero)
	intOrStr                   // IntOrString: its type and zero-ness
)

var (
	shapeClasses  sync.Map // reflect.Type -> shapeClass
	marshalerType = reflect.TypeFor[json.Marshaler]()
	stringMapType = reflect.TypeFor[map[string]string]()
	leafTypes     = map[reflect.Type]shapeClass{
		reflect.TypeFor[metav1.Time]():        leafZero,
		reflect.TypeFor[metav1.MicroTime]():   leafZero,
		reflect.TypeFor[resource.Quantity]():  leafZero,
		reflect.TypeFor[intstr.IntOrString](): intOrStr,
	}
)

func classOf(t reflect.Type) shapeClass {
	if c, ok := shapeClasses.Load(t); ok {
		return c.(shapeClass)
	}
	c, ok := leafTypes[t]
	if !ok {
		c = byKind
		for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
			if u.Implements(marshalerType) || u.Implements(zeroerType) {
				c = strict
			}
		}
	}
	shapeClasses.Store(t, c)
	return c
}

// sameShape reports whether a and b (values of one static type) have the
// same shape (see createMemo's rule above).
func sameShape(a, b reflect.Value) bool {
	t := a.Type()
	if t != b.Type() {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		// A pointer is written as what it points to: its type decides.
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameShape(a.Elem(), b.Elem())
	}
	switch classOf(t) {
	case strict:
		return strictEqual(a, b)
	case leafZero:
		return isZeroLeaf(a) == isZeroLeaf(b)
	case intOrStr:
		x, y := a.Interface().(intstr.IntOrString), b.Interface().(intstr.IntOrString)
		return x.Type == y.Type && (x == intstr.IntOrString{}) == (y == intstr.IntOrString{})
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); !f.IsExported() && !f.Anonymous {
				// Not a field of the object; strict, for a type
				// whose emptiness (omitzero) would count it.
				if !strictEqual(a.Field(i), b.Field(i)) {
					return false
				}
				continue
			}
			if !sameShape(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if t == stringMapType { // labels, annotations, selectors: no reflection
			bm := b.Interface().(map[string]string)
			for k, v := range a.Interface().(map[string]string) {
				if w, ok := bm[k]; !ok || (v == "") != (w == "") {
					return false
				}
			}
			return true
		}
		for it := a.MapRange(); it.Next(); {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !sameShape(it.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return a.IsZero() == b.IsZero()
	}
	return strictEqual(a, b) // slices, arrays and anything else
}

// isZeroLeaf asks a leaf type (metav1.Time, MicroTime, Quantity: IsZero
// on the pointer) whether it is zero, as omitzero would.
func isZeroLeaf(v reflect.Value) bool {
	if !v.CanAddr() {
		c := reflect.New(v.Type())
		c.Elem().Set(v)
		v = c.Elem()
	}
	return v.Addr().Interface().(zeroer).IsZero()
}

// strictEqual is reflect.DeepEqual on values (the objects are trees, so
// without its cycle detection), unexported fields included.
func strictEqual(a, b reflect.Value) bool {
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	t := a.Type()
	if t != b.Type() {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if t.Kind() == reflect.Pointer && a.Pointer() == b.Pointer() {
			return true
		}
		return strictEqual(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !strictEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !strictEqual(it.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return string(a.Bytes()) == string(b.Bytes())
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !strictEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	}
	return false // funcs, channels, unsafe pointers: never the same shape
}
