package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
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
// One exception: the object's own metadata.ownerReferences (not those of
// a template inside it), an associative list keyed by uid, are compared
// entry by entry: each entry's other fields (apiVersion, kind, name,
// controller, blockOwnerDeletion) by shape, as outside a list, for the
// field set holds their presence only, and the uids (the keys,
// k:{"uid":"..."}) equal, or else rewritten. Claims made from a
// template, each owned by another pod (another name and uid), are one
// shape so. A hit whose owners' uids differ rewrites those keys in the
// remembered FieldsV1 (rewriteOwners), which is exact only when
// ownerKeysOf proved, when the shape was stored, that each owner's key
// text occurs once in it and is the key of metadata.ownerReferences; the
// uids are plain (letters, digits, '-', '.', '_': written without
// escapes), distinct, and in the same order among themselves as the
// remembered ones (the field set writes the keys sorted). Otherwise the
// uids must be equal too.
//
// The memo answers only creates that carry no managedFields of their own
// (those decide the starting set) and no last-applied-configuration
// annotation, and remembers only answers of exactly one entry (an object
// whose fields are all stripped, or a failed comparison, gets none, and is
// left to the field manager every time). A manager whose last creates
// all missed (more than 2×memoShapes lookups) stores one miss in
// memoStoreEvery only: a family whose objects never share a shape would
// otherwise pay a copy per create for nothing. A lookup tries the shape
// of the manager's last hit first, and compares no shape whose labels,
// annotations or owners are not as many as the object's.
// TestCreateMemoAgreesWithTheFieldManager, TestCreateMemoCustomResources,
// TestCreateMemoOwnerUIDs and FuzzCreateMemo compare its answers with the
// field manager's own.

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
	// last is the entry of the last hit, tried first.
	last atomic.Int32
	// misses counts the lookups since the last hit: a family whose
	// objects never share a shape stops paying a copy per create.
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
	// meta is shape's own ObjectMeta (nil for an unstructured object);
	// ownerKeys its owners' keys in entry.FieldsV1 (see ownerKeysOf),
	// nil when a hit must have the same uids.
	meta      *metav1.ObjectMeta
	ownerKeys []ownerKey
}

// ownerKey is where the uid of owner (its index in ownerReferences)
// is in a FieldsV1: Raw[at:at+len(uid)].
type ownerKey struct {
	owner, at int
}

// newMemoEntry remembers entry as the answer for shape.
func newMemoEntry(shape runtime.Object, entry metav1.ManagedFieldsEntry) *memoEntry {
	e := &memoEntry{shape: shape, entry: entry}
	if e.meta = objectMeta(shape); e.meta != nil && entry.FieldsV1 != nil {
		e.ownerKeys = ownerKeysOf(e.meta.OwnerReferences, entry.FieldsV1.Raw)
	}
	return e
}

// objectMeta is a built-in object's own ObjectMeta, or nil.
func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return m
		}
	}
	return nil
}

// ownerKeysOf finds the keys of owners in raw, a FieldsV1, in the order
// they are written, when that is provably exact: every uid plain and
// distinct, its key's text ("k:{\"uid\":\"UID\"}") found exactly once in
// raw, and the set raw decodes to holding metadata.ownerReferences
// [uid=UID] (so that one occurrence is that key). Else nil.
func ownerKeysOf(owners []metav1.OwnerReference, raw []byte) []ownerKey {
	if len(owners) == 0 || !plainDistinctUIDs(owners) {
		return nil
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(raw)); err != nil {
		return nil
	}
	keys := make([]ownerKey, 0, len(owners))
	for i, o := range owners {
		uid := string(o.UID)
		text := []byte(ownerKeyPrefix + uid + ownerKeySuffix)
		at := bytes.Index(raw, text)
		if at < 0 || bytes.Contains(raw[at+1:], text) ||
			!set.Has(fieldpath.MakePathOrDie("metadata", "ownerReferences", fieldpath.KeyByFields("uid", uid))) {
			return nil
		}
		keys = append(keys, ownerKey{owner: i, at: at + len(ownerKeyPrefix)})
	}
	for i := 1; i < len(keys); i++ { // by offset: a few owners at most
		for j := i; j > 0 && keys[j].at < keys[j-1].at; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// An owner's key in a FieldsV1 (JSON text), around its plain uid.
const (
	ownerKeyPrefix = `"k:{\"uid\":\"`
	ownerKeySuffix = `\"}"`
)

// plainDistinctUIDs says whether owners' uids are distinct and plain:
// not empty, only letters, digits, '-', '.' and '_' (JSON writes them
// as they are, also inside a key's text).
func plainDistinctUIDs(owners []metav1.OwnerReference) bool {
	for i, o := range owners {
		if o.UID == "" {
			return false
		}
		for _, c := range []byte(o.UID) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return false
			}
		}
		for _, p := range owners[:i] {
			if p.UID == o.UID {
				return false
			}
		}
	}
	return true
}

// ownersMatch says whether owners (a create's) match e's shape's: as
// many, in the same order, each of the same shape as the rule has it
// outside lists (its strings both empty or both not, its pointers both
// nil or both not: the entry's fields but its key are present or not,
// as a top-level field's), and its uid (the key) equal;
// and, when a uid differs, whether e's FieldsV1 can be rewritten for
// them exactly (see ownerKeysOf): plain distinct uids, in the same order
// among themselves as e's.
func (e *memoEntry) ownersMatch(owners []metav1.OwnerReference) (ok, rewrite bool) {
	old := e.meta.OwnerReferences
	if len(old) != len(owners) || (old == nil) != (owners == nil) {
		return false, false
	}
	for i := range old {
		x, y := &old[i], &owners[i]
		if (x.APIVersion == "") != (y.APIVersion == "") || (x.Kind == "") != (y.Kind == "") || (x.Name == "") != (y.Name == "") ||
			(x.Controller == nil) != (y.Controller == nil) || (x.BlockOwnerDeletion == nil) != (y.BlockOwnerDeletion == nil) {
			return false, false
		}
		rewrite = rewrite || x.UID != y.UID
	}
	if !rewrite {
		return true, false
	}
	if e.ownerKeys == nil || !plainDistinctUIDs(owners) {
		return false, false
	}
	for i := range old {
		for j := i + 1; j < len(old); j++ {
			if (old[i].UID < old[j].UID) != (owners[i].UID < owners[j].UID) {
				return false, false
			}
		}
	}
	return true, true
}

// rewriteOwners is e's FieldsV1 with its owners' keys holding owners'
// uids (ownersMatch said it can be).
func (e *memoEntry) rewriteOwners(owners []metav1.OwnerReference) []byte {
	raw := e.entry.FieldsV1.Raw
	n := len(raw)
	for _, k := range e.ownerKeys {
		n += len(owners[k.owner].UID) - len(e.meta.OwnerReferences[k.owner].UID)
	}
	out, from := make([]byte, 0, n), 0
	for _, k := range e.ownerKeys {
		out = append(append(out, raw[from:k.at]...), owners[k.owner].UID...)
		from = k.at + len(e.meta.OwnerReferences[k.owner].UID)
	}
	return append(out, raw[from:]...)
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
	if e, rewrite := m.lookup(manager, obj); e != nil {
		var entry metav1.ManagedFieldsEntry
		if rewrite {
			entry = e.entry
			entry.FieldsV1 = &metav1.FieldsV1{Raw: e.rewriteOwners(acc.GetOwnerReferences())}
		} else {
			entry = *e.entry.DeepCopy()
		}
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
			m.store(manager, newMemoEntry(shape, *oacc.GetManagedFields()[0].DeepCopy()))
		}
	}
	return out, nil
}

// lookup returns the remembered answer of manager for an object of
// obj's shape, or nil; rewrite says its owners' uids are not obj's (see
// rewriteOwners). The last hit is tried first, and a shape whose labels,
// annotations or owners are not as many as obj's is not compared.
func (m *createMemo) lookup(manager string, obj runtime.Object) (_ *memoEntry, rewrite bool) {
	var cands [memoShapes]*memoEntry
	m.mu.RLock()
	r := m.byManager[manager]
	if r != nil {
		cands = r.entries
	}
	m.mu.RUnlock()
	if r == nil {
		return nil, false
	}
	om := objectMeta(obj)
	last := int(r.last.Load())
	for i := range memoShapes {
		at := (last + i) % memoShapes
		e := cands[at]
		if e == nil || (e.meta == nil) != (om == nil) {
			continue
		}
		var c shapeCmp
		if om != nil {
			if len(e.meta.Labels) != len(om.Labels) || len(e.meta.Annotations) != len(om.Annotations) {
				continue
			}
			ok, rw := e.ownersMatch(om.OwnerReferences)
			if !ok {
				continue
			}
			rewrite = rw
			c = shapeCmp{ownersA: &e.meta.OwnerReferences, ownersB: &om.OwnerReferences}
		}
		if c.same(shapeValue(e.shape), shapeValue(obj)) {
			if r.misses.Load() != 0 {
				r.misses.Store(0)
			}
			if at != last {
				r.last.Store(int32(at))
			}
			return e, rewrite
		}
	}
	r.misses.Add(1)
	return nil, false
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
// same shape (see createMemo's rule above; the owners' uids not
// excepted).
func sameShape(a, b reflect.Value) bool { return shapeCmp{}.same(a, b) }

// shapeCmp is sameShape but for the ownerReferences at ownersA in a and
// ownersB in b, which it takes as the same (the caller compared them).
type shapeCmp struct {
	ownersA, ownersB *[]metav1.OwnerReference
}

var ownerRefsType = reflect.TypeFor[[]metav1.OwnerReference]()

func (c shapeCmp) same(a, b reflect.Value) bool {
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
		return c.same(a.Elem(), b.Elem())
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
			if !c.same(a.Field(i), b.Field(i)) {
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
			if !bv.IsValid() || !c.same(it.Value(), bv) {
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
	if t == ownerRefsType && c.ownersA != nil && a.CanAddr() && b.CanAddr() &&
		a.Addr().UnsafePointer() == unsafe.Pointer(c.ownersA) && b.Addr().UnsafePointer() == unsafe.Pointer(c.ownersB) {
		return true
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
