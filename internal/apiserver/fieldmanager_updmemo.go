package apiserver

import (
	"bytes"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
//     compare the same way in both writes. An atomic map or struct
//     changes when one of its scalars, keys, entries or lists does,
//     which the same checks decide.
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
