package apiserver

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// An update's managedFields, as the field manager writes them, are a
// function of
//
//   - the entries it starts from: the stored object's (a status write's
//     always; a main write's when the written object has none, or the
//     same), or none (`managedFields: []`), as decodeLiveOrNew decides;
//   - the sets of fields the old and the new object have and which of
//     the fields both have changed value (structured-merge-diff's
//     Compare: added, removed, modified), from which it moves ownership
//     to the writer (its entry gains the added and changed fields, every
//     other entry loses the changed and removed ones);
//   - the manager, the operation (Update) and the subresource;
//   - the time: the writer's entry, when it gains a field, gets
//     time.Now().UTC(); the others keep theirs; the entries are sorted by
//     operation, time (in seconds), manager, apiVersion and subresource;
//     and past ten Update entries the oldest are merged by their times.
//
// Writes of one shape (pods of one template through the same status
// transitions by the same manager) get one answer but for the times, so
// updateMemo remembers, per kind, manager and subresource, the answer for
// a few writes, and a write that matches one (updateWalk.same and
// sameButTime) gets it with the times the field manager would have
// written, sorted as it sorts. The key holds
//
//   - the entries the field manager starts from, equal but for their
//     times (a time present or not as in the remembered ones), and the
//     same choice of them: the written object's entries absent, equal to
//     the stored object's (strictly, times included: either is read), or
//     a reset; any other entries in a main write are not memoized;
//   - the compared parts (comparedParts: what the field manager is given),
//     the old part against the remembered old part and the new against
//     the remembered new by the create memo's shape rule, but for lists
//     that the kind's schema says are associative with keys
//     (listType=map): those have the same length, the same key values at
//     each index, no key twice, and their entries' other fields by shape;
//     atomic lists (one leaf to the comparison), and any list inside an
//     atomic map or struct, are null, empty or not alike; sets (their
//     members are keys), []byte, and types that marshal themselves (but
//     the four leaf types of the shape rule) are equal;
//   - which fields changed: at every scalar both parts have, old and new
//     are equal exactly when the remembered old and new are (Go's ==
//     on one type, which is the comparison's equality for plain scalars;
//     the JSON the types marshal to for metav1.Time, MicroTime,
//     resource.Quantity and intstr.IntOrString); an associative list's
//     entries are matched by key as the comparison matches them; an
//     atomic list equals the other exactly when the remembered ones are
//     equal (reflect.DeepEqual, as the comparison compares lists of Go
//     values). Equal sets and self-marshaling values need no more: they
//     compare the same way in both writes. An atomic map, struct or list is changed
//     when one of its scalars, keys or entries is, which the same
//     checks decide.
//
// A time enters the answer only by which entry gets the new time (the
// writer's, when it gains a field: the same in both writes), the kept
// times (copied from the same entry) and the order, which a hit sorts
// again with the field manager's comparison; answers with ten Update
// entries or more (where the oldest might have been merged, by time) are
// not remembered. Custom resources are not memoized (their objects are
// maps of any values; the create memo handles them).
// TestUpdateMemoAgreesWithTheFieldManager and FuzzUpdateMemo compare its
// answers with the field manager's.
type updateMemo struct {
	mu    sync.RWMutex
	rings map[updateMemoKey]*updateRing
}

type updateMemoKey struct{ manager, sub string }

type updateRing struct {
	entries [updateShapes]*updateEntry // immutable once stored
	next    int
	last    atomic.Int32
	misses  atomic.Int32
}

// updateEntry is the field manager's answer for one update.
type updateEntry struct {
	// live and obj are the compared parts the field manager was given
	// (copies; their managedFields are not read).
	live, obj runtime.Object
	// in are the entries it started from, reset whether the write reset
	// them.
	in    []metav1.ManagedFieldsEntry
	reset bool
	// out is its answer, nil when it wrote none.
	out    []memoOut
	outNil bool
}

// memoOut is an entry of an answer: its time is now (timeNow), none
// (timeNone) or the time of in[time].
type memoOut struct {
	entry metav1.ManagedFieldsEntry // without time
	time  int
}

// updateShapes is how many answers the memo keeps per kind, manager and
// subresource; a new one replaces the oldest.
const updateShapes = 8

const (
	timeNow  = -1
	timeNone = -2
	// maxUpdateManagers is the field manager's cap on Update entries
	// (managedfields' DefaultMaxUpdateManagers), past which it merges the
	// oldest by time.
	maxUpdateManagers = 10
)

// updateFromMemo answers an update by manager of sub from live to obj,
// whose compared parts are l and o, from the memo: hit says it wrote
// obj's managedFields; else miss, when not nil, stores the field
// manager's answer.
func (fm *fieldManagers) updateFromMemo(sub, manager string, live, obj, l, o runtime.Object) (hit bool, miss *updateMiss) {
	liveM, objM := objectMeta(live), objectMeta(obj)
	if fm.walk == nil || liveM == nil || objM == nil {
		return false, nil
	}
	reset, ok := updateInput(sub, liveM, objM)
	if !ok {
		return false, nil
	}
	e, store := fm.updates.lookup(*fm.walk, manager, sub, l, o, liveM.ManagedFields, reset)
	if e != nil {
		objM.ManagedFields = e.answer(liveM.ManagedFields)
		return true, nil
	}
	if !store {
		return false, nil
	}
	miss = &updateMiss{m: &fm.updates, sub: sub, manager: manager, l: l, o: o, in: liveM.ManagedFields, reset: reset}
	if sub == "" {
		miss.wrote = objM.ManagedFields // else not read by the field manager
	}
	return false, miss
}

// updateMiss is an update the memo did not answer, to store the field
// manager's answer for.
type updateMiss struct {
	m            *updateMemo
	sub, manager string
	l, o         runtime.Object
	in, wrote    []metav1.ManagedFieldsEntry
	reset        bool
}

// store remembers out, the field manager's answer; nil does nothing.
func (u *updateMiss) store(out []metav1.ManagedFieldsEntry) {
	if u == nil {
		return
	}
	if e := newUpdateEntry(u.l, u.o, u.in, u.wrote, out, u.reset, u.manager, u.sub); e != nil {
		u.m.store(u.manager, u.sub, e)
	}
}

// updateInput says which entries the field manager starts an update
// from (decodeLiveOrNew): the stored object's, or none when reset; ok
// false when the written object brings entries of its own.
func updateInput(sub string, live, obj *metav1.ObjectMeta) (reset, ok bool) {
	switch w := obj.ManagedFields; {
	case sub != "" || w == nil:
		return false, true
	case len(w) == 0 || len(w) == 1 && reflect.DeepEqual(w[0], metav1.ManagedFieldsEntry{}):
		return true, true
	case strictEqual(reflect.ValueOf(w), reflect.ValueOf(live.ManagedFields)):
		return false, true
	}
	return false, false
}

// sameButTime says whether a and b are the same entries but for their
// times (a time present in both or in neither).
func sameButTime(a, b []metav1.ManagedFieldsEntry) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Manager != y.Manager || x.Operation != y.Operation || x.APIVersion != y.APIVersion ||
			x.FieldsType != y.FieldsType || x.Subresource != y.Subresource ||
			(x.Time == nil) != (y.Time == nil) || (x.FieldsV1 == nil) != (y.FieldsV1 == nil) ||
			x.FieldsV1 != nil && !bytes.Equal(x.FieldsV1.Raw, y.FieldsV1.Raw) {
			return false
		}
	}
	return true
}

// lookup returns the remembered answer for an update by manager of sub
// whose compared parts are l and o, starting from in (reset: none), or
// nil and whether the field manager's answer should be stored: always
// while the manager's updates hit or missed a few times only; then
// lookups and stores are made for one miss in memoStoreEvery only, so
// that writes that never repeat (a claim reserved for another pod each
// time) pay neither, and a family that begins to repeat still gets in.
func (m *updateMemo) lookup(w updateWalk, manager, sub string, l, o runtime.Object, in []metav1.ManagedFieldsEntry, reset bool) (_ *updateEntry, store bool) {
	var cands [updateShapes]*updateEntry
	m.mu.RLock()
	r := m.rings[updateMemoKey{manager, sub}]
	if r != nil {
		cands = r.entries
	}
	m.mu.RUnlock()
	if r == nil {
		return nil, true
	}
	if n := r.misses.Add(1) - 1; n > 2*updateShapes && n%memoStoreEvery != 0 {
		return nil, false
	}
	last := int(r.last.Load())
	lv, ov := reflect.ValueOf(l), reflect.ValueOf(o)
	for i := range updateShapes {
		at := (last + i) % updateShapes
		e := cands[at]
		if e == nil || e.reset != reset || !sameButTime(e.in, in) {
			continue
		}
		if w.same(lv, ov, reflect.ValueOf(e.live), reflect.ValueOf(e.obj), w.root) {
			r.misses.Store(0)
			if at != last {
				r.last.Store(int32(at))
			}
			return e, false
		}
	}
	return nil, true
}

func (m *updateMemo) store(manager, sub string, e *updateEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := updateMemoKey{manager, sub}
	r := m.rings[key]
	if r == nil {
		if m.rings == nil || len(m.rings) >= memoManagers {
			m.rings = map[updateMemoKey]*updateRing{}
		}
		r = &updateRing{}
		m.rings[key] = r
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % updateShapes
}

// newUpdateEntry remembers out, the field manager's answer for the
// update of l to o (the compared parts) by manager of sub, which started
// from in (the stored object's entries; wrote, the written object's,
// when they were equal), or nil when the answer cannot be told apart
// from its times: an entry's time that is none of in's or wrote's (by
// identity: the field manager carries the pointers over) but the
// writer's new one, or ten Update entries or more.
func newUpdateEntry(l, o runtime.Object, in, wrote, out []metav1.ManagedFieldsEntry, reset bool, manager, sub string) *updateEntry {
	e := &updateEntry{live: l.DeepCopyObject(), obj: o.DeepCopyObject(), reset: reset, outNil: out == nil}
	for _, c := range []runtime.Object{e.live, e.obj} {
		if m := objectMeta(c); m != nil {
			m.ManagedFields = nil // not compared by the walk
		}
	}
	if in != nil {
		e.in = make([]metav1.ManagedFieldsEntry, len(in))
		for i := range in {
			in[i].DeepCopyInto(&e.in[i]) // its time only as present or not
		}
	}
	updates := 0
	for _, x := range out {
		if x.Operation == metav1.ManagedFieldsOperationUpdate {
			updates++
		}
		mo := memoOut{time: timeNow}
		switch {
		case x.Time == nil:
			mo.time = timeNone
		default:
			for i := range in {
				if in[i].Time == x.Time || i < len(wrote) && wrote[i].Time == x.Time {
					mo.time = i
					break
				}
			}
		}
		if mo.time == timeNow && (x.Manager != manager || x.Operation != metav1.ManagedFieldsOperationUpdate || x.Subresource != sub) {
			return nil
		}
		x.DeepCopyInto(&mo.entry)
		mo.entry.Time = nil
		e.out = append(e.out, mo)
	}
	if updates >= maxUpdateManagers {
		return nil
	}
	return e
}

// answer is e's answer for an update starting from in (the same entries
// but for their times).
func (e *updateEntry) answer(in []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if e.outNil {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, len(e.out))
	for i, x := range e.out {
		out[i] = x.entry
		if x.entry.FieldsV1 != nil {
			out[i].FieldsV1 = &metav1.FieldsV1{Raw: bytes.Clone(x.entry.FieldsV1.Raw)}
		}
		switch x.time {
		case timeNone:
		case timeNow:
			out[i].Time = &metav1.Time{Time: time.Now().UTC()}
		default:
			t := *in[x.time].Time
			out[i].Time = &t
		}
	}
	sortManagedFields(out)
	return out
}

// sortManagedFields sorts entries as the field manager does
// (sortEncodedManagedFields): by operation, time in seconds, manager,
// apiVersion and subresource.
func sortManagedFields(entries []metav1.ManagedFieldsEntry) {
	sort.Slice(entries, func(i, j int) bool {
		p, q := entries[i], entries[j]
		if p.Operation != q.Operation {
			return p.Operation < q.Operation
		}
		var ps, qs int64
		if p.Time != nil {
			ps = p.Time.Unix()
		}
		if q.Time != nil {
			qs = q.Time.Unix()
		}
		if ps != qs {
			return ps < qs
		}
		if p.Manager != q.Manager {
			return p.Manager < q.Manager
		}
		if p.APIVersion != q.APIVersion {
			return p.APIVersion < q.APIVersion
		}
		return p.Subresource < q.Subresource
	})
}

// updateWalk compares an update's compared parts with a remembered
// update's by the kind's schema (see updateMemo).
type updateWalk struct {
	s    *smdschema.Schema
	root smdschema.TypeRef
	// atomic says the walk is inside an atomic map or struct, which the
	// comparison compares as one value.
	atomic bool
}

// same reports whether l and l0, o and o0 have the same shape and l and
// o differ where l0 and o0 do (see updateMemo); tr is their type in the
// schema. An invalid value is an absent one (a map's missing key, a nil
// pointer); l and o are of one type, l0 and o0 too.
func (w updateWalk) same(l, o, l0, o0 reflect.Value, tr smdschema.TypeRef) bool {
	if l.IsValid() != l0.IsValid() || o.IsValid() != o0.IsValid() {
		return false
	}
	var t reflect.Type
	switch {
	case !l.IsValid() && !o.IsValid():
		return true
	case !l.IsValid():
		t = o.Type()
	default:
		t = l.Type()
		if o.IsValid() && o.Type() != t {
			return false
		}
	}
	if l.IsValid() && l0.Type() != t || o.IsValid() && o0.Type() != t {
		return false
	}
	if l.IsValid() && !l.CanInterface() || o.IsValid() && !o.CanInterface() {
		return bothEqual(l, l0, o, o0)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if l.IsValid() && l.IsNil() != l0.IsNil() || o.IsValid() && o.IsNil() != o0.IsNil() {
			return false
		}
		return w.same(elem(l), elem(o), elem(l0), elem(o0), tr)
	}
	switch classOf(t) {
	case strict:
		return bothEqual(l, l0, o, o0)
	case leafZero, intOrStr:
		if l.IsValid() && !sameShape(l, l0) || o.IsValid() && !sameShape(o, o0) {
			return false
		}
		if !l.IsValid() || !o.IsValid() {
			return true
		}
		a, ok1 := leafEqual(l, o)
		b, ok2 := leafEqual(l0, o0)
		return ok1 && ok2 && a == b
	}
	switch t.Kind() {
	case reflect.Struct:
		return w.sameStruct(l, o, l0, o0, t, tr)
	case reflect.Map:
		return w.sameMap(l, o, l0, o0, t, tr)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Array || t.Elem().Kind() == reflect.Uint8 {
			return bothEqual(l, l0, o, o0)
		}
		a, ok := w.s.Resolve(tr)
		switch {
		case !ok || a.List == nil:
			return bothEqual(l, l0, o, o0)
		case a.List.ElementRelationship == smdschema.Atomic || w.atomic:
			return sameAtomicList(l, o, l0, o0)
		case a.List.ElementRelationship != smdschema.Associative || len(a.List.Keys) == 0:
			return bothEqual(l, l0, o, o0) // sets: the members are the keys
		}
		return w.sameKeyedList(l, o, l0, o0, t, a.List)
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		if l.IsValid() && l.IsZero() != l0.IsZero() || o.IsValid() && o.IsZero() != o0.IsZero() {
			return false
		}
		if !l.IsValid() || !o.IsValid() {
			return true
		}
		a, ok1 := scalarEqual(l, o)
		b, ok2 := scalarEqual(l0, o0)
		return ok1 && ok2 && a == b
	}
	return false // complex numbers, funcs, channels: not in objects
}

// elem is what v (a pointer or interface, or invalid) holds, invalid
// when nil.
func elem(v reflect.Value) reflect.Value {
	if !v.IsValid() || v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

// bothEqual says whether l equals l0 and o equals o0 (strictEqual; an
// invalid value equals only an invalid one).
func bothEqual(l, l0, o, o0 reflect.Value) bool {
	return strictEqual(l, l0) && strictEqual(o, o0)
}

// scalarEqual is the comparison's equality of two plain scalars of one
// type; ok false for a float that is not a number.
func scalarEqual(a, b reflect.Value) (eq, ok bool) {
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String(), true
	case reflect.Bool:
		return a.Bool() == b.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int(), true
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		if math.IsNaN(x) || math.IsNaN(y) {
			return false, false
		}
		return x == y, true
	}
	return a.Uint() == b.Uint(), true
}

// leafEqual compares two values of a leaf type (metav1.Time, MicroTime,
// resource.Quantity, intstr.IntOrString) by the JSON they marshal to,
// which is what the comparison reads of them: times by the instant in
// the precision they are written in (seconds, microseconds; null when
// zero) for years 1 to 9999, where their text is that instant's;
// IntOrString by its type and that type's value; else (quantities, whose
// text is their canonical form) by the text.
func leafEqual(a, b reflect.Value) (eq, ok bool) {
	switch a.Type() {
	case timeType:
		x, y := leafAt[metav1.Time](a), leafAt[metav1.Time](b)
		if x.IsZero() || y.IsZero() {
			return x.IsZero() == y.IsZero(), true
		}
		if plainYear(x.Time) && plainYear(y.Time) {
			return x.Unix() == y.Unix(), true
		}
	case microTimeType:
		x, y := leafAt[metav1.MicroTime](a), leafAt[metav1.MicroTime](b)
		if x.IsZero() || y.IsZero() {
			return x.IsZero() == y.IsZero(), true
		}
		if plainYear(x.Time) && plainYear(y.Time) {
			return x.UnixMicro() == y.UnixMicro(), true
		}
	case intOrStringType:
		x, y := leafAt[intstr.IntOrString](a), leafAt[intstr.IntOrString](b)
		switch {
		case x.Type != y.Type:
			// An int and a string never compare equal; an unknown
			// type does not marshal.
			return false, (x.Type == intstr.Int || x.Type == intstr.String) && (y.Type == intstr.Int || y.Type == intstr.String)
		case x.Type == intstr.Int:
			return x.IntVal == y.IntVal, true
		case x.Type == intstr.String:
			return x.StrVal == y.StrVal, true
		}
	}
	return jsonEqual(a, b)
}

var intOrStringType = reflect.TypeFor[intstr.IntOrString]() // timeType, microTimeType: openapi_schema.go

// leafAt reads v, of type T, without copying it to the heap when it is
// addressable.
func leafAt[T any](v reflect.Value) T {
	if v.CanAddr() {
		return *(*T)(v.Addr().UnsafePointer())
	}
	return v.Interface().(T)
}

// plainYear says whether t's year in UTC is 1 to 9999 (RFC 3339 writes
// it in four digits).
func plainYear(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

// jsonEqual compares two values by the JSON they marshal to.
func jsonEqual(a, b reflect.Value) (eq, ok bool) {
	x, err1 := json.Marshal(a.Interface())
	y, err2 := json.Marshal(b.Interface())
	return bytes.Equal(x, y), err1 == nil && err2 == nil
}

func (w updateWalk) sameStruct(l, o, l0, o0 reflect.Value, t reflect.Type, tr smdschema.TypeRef) bool {
	a, ok := w.s.Resolve(tr)
	fs := fieldsOf(t)
	if !ok || a.Map == nil || fs == nil {
		return bothEqual(l, l0, o, o0)
	}
	if a.Map.ElementRelationship == smdschema.Atomic {
		w.atomic = true
	}
	for _, f := range fs {
		fl, fo, fl0, fo0 := fieldOf(l, f.index), fieldOf(o, f.index), fieldOf(l0, f.index), fieldOf(o0, f.index)
		switch f.how {
		case fieldSkipped:
		case fieldStrict:
			if !bothEqual(fl, fl0, fo, fo0) {
				return false
			}
		case fieldInline:
			if !w.same(fl, fo, fl0, fo0, tr) {
				return false
			}
		default:
			ftr := fieldType(a.Map, f.name)
			if ftr == (smdschema.TypeRef{}) {
				if !bothEqual(fl, fl0, fo, fo0) {
					return false
				}
				continue
			}
			if !w.same(fl, fo, fl0, fo0, ftr) {
				return false
			}
		}
	}
	return true
}

// fieldType is the type of m's field name, or of its unknown fields.
func fieldType(m *smdschema.Map, name string) smdschema.TypeRef {
	if f, ok := m.FindField(name); ok {
		return f.Type
	}
	return m.ElementType
}

func fieldOf(v reflect.Value, i int) reflect.Value {
	if !v.IsValid() {
		return v
	}
	return v.Field(i)
}

func (w updateWalk) sameMap(l, o, l0, o0 reflect.Value, t reflect.Type, tr smdschema.TypeRef) bool {
	a, ok := w.s.Resolve(tr)
	if !ok || a.Map == nil || t.Key().Kind() != reflect.String {
		return bothEqual(l, l0, o, o0)
	}
	if a.Map.ElementRelationship == smdschema.Atomic {
		w.atomic = true
	}
	for _, p := range [][2]reflect.Value{{l, l0}, {o, o0}} {
		if p[0].IsValid() && (p[0].IsNil() != p[1].IsNil() || p[0].Len() != p[1].Len()) {
			return false
		}
	}
	if l.IsValid() {
		for it := l.MapRange(); it.Next(); {
			k := it.Key()
			v0 := l0.MapIndex(k)
			if !v0.IsValid() {
				return false
			}
			var ov, ov0 reflect.Value
			if o.IsValid() {
				ov, ov0 = o.MapIndex(k), o0.MapIndex(k)
			}
			if !w.same(it.Value(), ov, v0, ov0, fieldType(a.Map, k.String())) {
				return false
			}
		}
	}
	if o.IsValid() {
		for it := o.MapRange(); it.Next(); {
			k := it.Key()
			if l.IsValid() && l.MapIndex(k).IsValid() {
				continue
			}
			v0 := o0.MapIndex(k)
			if !v0.IsValid() || !w.same(reflect.Value{}, it.Value(), reflect.Value{}, v0, fieldType(a.Map, k.String())) {
				return false
			}
		}
	}
	return true
}

// sameKeyedList compares associative lists with keys (see updateMemo):
// of structs only, the same length and keys at each index, no key twice;
// entries matched by key as the comparison matches them.
func (w updateWalk) sameKeyedList(l, o, l0, o0 reflect.Value, t reflect.Type, list *smdschema.List) bool {
	keys := keyFields(t.Elem(), list.Keys)
	if keys == nil {
		return bothEqual(l, l0, o, o0)
	}
	for _, p := range [][2]reflect.Value{{l, l0}, {o, o0}} {
		a, b := p[0], p[1]
		if !a.IsValid() {
			continue
		}
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() || a.Len() > 64 {
			return false
		}
		for i := range a.Len() {
			if !sameKeys(a.Index(i), b.Index(i), keys) {
				return false
			}
			for j := range i {
				if sameKeys(a.Index(i), a.Index(j), keys) {
					return false
				}
			}
		}
	}
	var matched uint64
	if l.IsValid() {
		for i := range l.Len() {
			var ov, ov0 reflect.Value
			if o.IsValid() {
				for j := range o.Len() {
					if sameKeys(l.Index(i), o.Index(j), keys) {
						ov, ov0 = o.Index(j), o0.Index(j)
						matched |= 1 << j
						break
					}
				}
			}
			if !w.same(l.Index(i), ov, l0.Index(i), ov0, list.ElementType) {
				return false
			}
		}
	}
	if o.IsValid() {
		for j := range o.Len() {
			if matched&(1<<j) == 0 && !w.same(reflect.Value{}, o.Index(j), reflect.Value{}, o0.Index(j), list.ElementType) {
				return false
			}
		}
	}
	return true
}

// sameAtomicList compares atomic lists, which the comparison takes as
// one leaf: present as null, empty or not alike (l and l0, o and o0),
// and l equal to o exactly when l0 equals o0, by reflect.DeepEqual's
// rule, which is the comparison's equality of two lists of Go values
// (structured-merge-diff's listReflect), finer than their JSON's (an
// empty list inside is not a missing one, a time's nanoseconds count).
// A list inside an atomic map or struct is compared so too, keyed or
// not: the comparison takes the whole as one value.
func sameAtomicList(l, o, l0, o0 reflect.Value) bool {
	for _, p := range [][2]reflect.Value{{l, l0}, {o, o0}} {
		if p[0].IsValid() && (p[0].IsNil() != p[1].IsNil() || (p[0].Len() == 0) != (p[1].Len() == 0)) {
			return false
		}
	}
	if !l.IsValid() || !o.IsValid() {
		return true
	}
	return strictEqual(l, o) == strictEqual(l0, o0)
}

// keyFields are the indices of a struct type's key fields (by JSON
// name), or nil when one is not a plain named field of it.
func keyFields(t reflect.Type, names []string) []int {
	if t.Kind() != reflect.Struct {
		return nil
	}
	key := keyFieldsKey{t, strings.Join(names, "\x00")}
	if ks, ok := keyFieldsCache.Load(key); ok {
		return ks.([]int)
	}
	ks := findKeyFields(t, names)
	keyFieldsCache.Store(key, ks)
	return ks
}

type keyFieldsKey struct {
	t     reflect.Type
	names string
}

var keyFieldsCache sync.Map // keyFieldsKey -> []int

func findKeyFields(t reflect.Type, names []string) []int {
	fs := fieldsOf(t)
	out := make([]int, 0, len(names))
	for _, n := range names {
		at := -1
		for _, f := range fs {
			if f.how == fieldNamed && f.name == n {
				at = f.index
			}
		}
		if at < 0 {
			return nil
		}
		out = append(out, at)
	}
	return out
}

func sameKeys(a, b reflect.Value, keys []int) bool {
	for _, k := range keys {
		if !strictEqual(a.Field(k), b.Field(k)) {
			return false
		}
	}
	return true
}

// How updateWalk compares a struct field.
const (
	fieldNamed   = iota // by its schema type, found by JSON name
	fieldInline         // embedded, its fields the parent's
	fieldStrict         // not read by the comparison: equal
	fieldSkipped        // metadata.managedFields: compared apart
)

type walkField struct {
	index int
	name  string
	how   int
}

var (
	walkFields     sync.Map // reflect.Type -> []walkField (nil: compare equal)
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
)

// fieldsOf is how updateWalk reads a struct type's fields, named as the
// comparison's reflection names them (structured-merge-diff's JSON tag
// rules); nil when two fields, embedded ones' included, have one name.
func fieldsOf(t reflect.Type) []walkField {
	if fs, ok := walkFields.Load(t); ok {
		return fs.([]walkField)
	}
	var fs []walkField
	names := map[string]bool{}
	if flatNames(t, names, 0) {
		for i := range t.NumField() {
			f := t.Field(i)
			wf := walkField{index: i, name: f.Name}
			name, _, _ := cutTag(f.Tag.Get("json"))
			switch {
			case t == objectMetaType && f.Name == "ManagedFields":
				wf.how = fieldSkipped
			case !f.IsExported() && !f.Anonymous || f.Tag.Get("json") == "-":
				wf.how = fieldStrict
			case f.Anonymous && name == "":
				wf.how = fieldInline
			default:
				if name != "" {
					wf.name = name
				}
			}
			fs = append(fs, wf)
		}
	}
	walkFields.Store(t, fs)
	return fs
}

// flatNames adds t's field names, embedded structs' flattened, to names;
// false when one repeats (or embedding is too deep).
func flatNames(t reflect.Type, names map[string]bool, depth int) bool {
	if depth > 8 {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous || f.Tag.Get("json") == "-" {
			continue
		}
		name, _, _ := cutTag(f.Tag.Get("json"))
		if f.Anonymous && name == "" {
			e := f.Type
			if e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if e.Kind() != reflect.Struct {
				return false
			}
			if !flatNames(e, names, depth+1) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if names[name] {
			return false
		}
		names[name] = true
	}
	return true
}

func cutTag(tag string) (name, opts string, found bool) {
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}
