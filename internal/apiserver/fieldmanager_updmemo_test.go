package apiserver

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	corev1 "allot.dev/allot/api/core/v1"
)

// anUpdate is one update for the memo tests: manager's write of obj
// (of sub) over the stored live.
type anUpdate struct {
	sub, manager string
	live, obj    runtime.Object
}

// libraryUpdate is the field manager's answer for u as trackUpdate
// asked it before the memo: given the compared parts (entriesOf: times
// as kept, new or none). When the field manager compares the whole
// objects without an error (objects the server would not store, such as
// keyed lists with a key twice, can fail), it checks that its answer for
// them is the same.
func libraryUpdate(t testing.TB, k *kind, u anUpdate) string {
	t.Helper()
	fm, err := k.fieldManager(u.sub)
	if err != nil {
		t.Fatal(err)
	}
	key := memoKeyOf(k, u)
	live, obj := u.live.DeepCopyObject(), u.obj.DeepCopyObject()
	live.GetObjectKind().SetGroupVersionKind(k.gvk)
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	if key == nil {
		return entriesOf(t, fm.UpdateNoErrors(live, obj, u.manager), u.live)
	}
	parts := entriesOf(t, fm.UpdateNoErrors(key.l, key.o, u.manager), u.live)
	if whole, err := fm.Update(live, obj, u.manager); err == nil {
		if w := entriesOf(t, whole, u.live); w != parts {
			t.Errorf("%s %s by %s: the whole objects give\n%s\ncompared parts give\n%s", k.gvk.Kind, u.sub, u.manager, w, parts)
		}
	}
	return parts
}

// memoUpdate is trackUpdate's answer for u (through the memo); it checks
// that a new time is now, in UTC, and says whether the memo answered.
func memoUpdate(t testing.TB, k *kind, u anUpdate) (string, bool) {
	t.Helper()
	hit := updateMemoHas(k, u)
	before := time.Now()
	out, err := testAPI.trackUpdate(k, u.sub, u.live.DeepCopyObject(), u.obj.DeepCopyObject(), u.manager)
	if err != nil {
		t.Fatal(err)
	}
	got := entriesOf(t, out, u.live)
	for _, e := range mustAccessor(t, out).GetManagedFields() {
		if e.Time != nil && e.Manager == u.manager && strings.Contains(got, e.Manager+" Update "+e.Subresource+" "+e.APIVersion+" new") &&
			(e.Time.Location() != time.UTC || e.Time.Time.Before(before) || e.Time.Time.After(time.Now())) {
			t.Errorf("%s: new entry time %v, want now in UTC", k.gvk.Kind, e.Time)
		}
	}
	return got, hit
}

// updateMemoHas says whether the memo holds an answer for u (without
// counting a miss).
func updateMemoHas(k *kind, u anUpdate) bool {
	key := memoKeyOf(k, u)
	if key == nil {
		return false
	}
	m := &k.fm.updates
	m.mu.RLock()
	r := m.rings[updateMemoKey{u.manager, u.sub}]
	var cands [updateShapes]*updateEntry
	if r != nil {
		cands = r.entries
	}
	m.mu.RUnlock()
	for _, e := range cands {
		if e != nil && sameKey(*k.fm.walk, key, &memoKey{l: e.live, o: e.obj, in: e.in, reset: e.reset}) {
			return true
		}
	}
	return false
}

// memoKey is what the memo compares of an update.
type memoKey struct {
	l, o  runtime.Object
	in    []metav1.ManagedFieldsEntry
	reset bool
}

// memoKeyOf is u's key as trackUpdate computes it, nil when the memo
// does not take u.
func memoKeyOf(k *kind, u anUpdate) *memoKey {
	live, obj := u.live.DeepCopyObject(), u.obj.DeepCopyObject()
	live.GetObjectKind().SetGroupVersionKind(k.gvk)
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	lm, om := objectMeta(live), objectMeta(obj)
	if k.fm.walk == nil || lm == nil || om == nil || lm.UID == "" {
		return nil
	}
	reset, ok := updateInput(u.sub, lm, om)
	if !ok {
		return nil
	}
	unchanged := ""
	switch {
	case !k.hasStatus:
	case u.sub == "status":
		unchanged = "Spec"
	default:
		unchanged = "Status"
	}
	l, o := comparedParts(live, obj, unchanged)
	return &memoKey{l: l, o: o, in: lm.ManagedFields, reset: reset}
}

// sameKey says whether the memo takes a and b (of one manager and
// subresource) as one update.
func sameKey(w updateWalk, a, b *memoKey) bool {
	return a != nil && b != nil && a.reset == b.reset && sameButTime(a.in, b.in) &&
		w.same(reflect.ValueOf(a.l), reflect.ValueOf(a.o), reflect.ValueOf(b.l), reflect.ValueOf(b.o), w.root)
}

// capped says whether an answer has as many Update entries as the field
// manager keeps (the memo does not remember those: the oldest may have
// been merged by their times).
func capped(answer string) bool {
	return strings.Count(answer, " Update ") >= maxUpdateManagers
}

// sortedLines is an answer's entries in a fixed order (the field
// manager sorts them by time).
func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// checkUpdateMemo compares the memo with the field manager for updates
// of one kind: updates the memo takes as one get the same answer from
// the field manager (times aside), and trackUpdate's answer for each,
// hit or miss, is the field manager's. It returns the pairs taken as one
// and trackUpdate's hits.
func checkUpdateMemo(t *testing.T, k *kind, ups []anUpdate) (pairs, hits int) {
	t.Helper()
	answers := make([]string, len(ups))
	keys := make([]*memoKey, len(ups))
	for i, u := range ups {
		answers[i] = libraryUpdate(t, k, u)
		keys[i] = memoKeyOf(k, u)
	}
	for i := range ups {
		for j := i + 1; j < len(ups); j++ {
			if ups[i].sub != ups[j].sub || ups[i].manager != ups[j].manager || !sameKey(*k.fm.walk, keys[i], keys[j]) ||
				capped(answers[i]) || capped(answers[j]) {
				continue
			}
			pairs++
			if sortedLines(answers[i]) != sortedLines(answers[j]) {
				a, _ := json.Marshal(ups[i].live)
				b, _ := json.Marshal(ups[i].obj)
				c, _ := json.Marshal(ups[j].live)
				d, _ := json.Marshal(ups[j].obj)
				t.Errorf("%s %s by %s: updates taken as one, different managedFields:\n%s\n%s\n-> %s\n%s\n%s\n-> %s",
					k.gvk.Kind, ups[i].sub, ups[i].manager, a, b, answers[i], c, d, answers[j])
			}
		}
	}
	for i, u := range ups {
		got, hit := memoUpdate(t, k, u)
		if hit {
			hits++
		}
		if got != answers[i] {
			a, _ := json.Marshal(u.live)
			b, _ := json.Marshal(u.obj)
			t.Errorf("%s %s by %s (hit %v): trackUpdate answers\n%s\nthe field manager\n%s\nfor\n%s\n%s", k.gvk.Kind, u.sub, u.manager, hit, got, answers[i], a, b)
		}
	}
	return pairs, hits
}

// TestUpdateMemoAgreesWithTheFieldManager fills objects of every
// built-in kind at random, stores them as created (and, for some, written
// by a second manager, or applied), and updates them by several managers,
// of the main resource and of status: values changed outside and inside
// lists, fields dropped, the object rewritten, a label added,
// managedFields left out or reset, nothing changed. Each update has a
// twin whose stored and written objects have every value mapped the same
// injective way (so the same fields changed) and its entries' times
// moved: the memo takes twins as one. Every pair the memo takes as one
// gets the same answer from the field manager, and trackUpdate's answers
// (hits and misses) are the field manager's.
func TestUpdateMemoAgreesWithTheFieldManager(t *testing.T) {
	served := 0
	for ki, bk := range builtinKinds() {
		k := testAPI.reg.get(bk.gvk.GroupVersion().WithResource(bk.resource))
		if k == nil || k.fm == nil {
			continue
		}
		if _, ok := k.newObj().(*unstructured.Unstructured); ok {
			continue
		}
		if _, err := k.fieldManager(""); err != nil || k.fm.walk == nil {
			t.Errorf("%s: no schema walk (%v)", k.gvk.Kind, err)
			continue
		}
		served++
		resetUpdateMemo(k)
		r := rand.New(rand.NewPCG(uint64(ki), 28))
		ups := randomUpdates(t, k, r, []float64{0.9, 0.6, 0.3, 0.1})
		pairs, hits := checkUpdateMemo(t, k, ups)
		t.Logf("%s: %d updates, %d pairs taken as one, %d hits", k.gvk.Kind, len(ups), pairs, hits)
		if hits < len(ups)/8 {
			t.Errorf("%s: only %d hits of %d updates", k.gvk.Kind, hits, len(ups))
		}
	}
	if served < 10 {
		t.Errorf("only %d built-in kinds checked", served)
	}
}

func resetUpdateMemo(k *kind) {
	m := &k.fm.updates
	m.mu.Lock()
	m.rings = nil
	m.mu.Unlock()
}

// randomUpdates is the updates of TestUpdateMemoAgreesWithTheFieldManager
// for random objects of k filled with the densities ps, each followed by
// its twin.
func randomUpdates(t testing.TB, k *kind, r *rand.Rand, ps []float64) []anUpdate {
	var ups []anUpdate
	for bi, p := range ps {
		base := randomObject(k, r, p, bi)
		live := storedBy(t, k, "", k.newObj(), base, "creator")
		switch r.IntN(3) {
		case 1: // a second writer
			next := live.DeepCopyObject()
			perturbWith(reflect.ValueOf(next).Elem(), r, perturbing{zero: 0.1})
			keepMeta(next, live)
			live = storedBy(t, k, "", live, next, "second")
		case 2: // an applier
			if applied := applyRandom(t, k, live, r); applied != nil {
				live = applied
			}
		}
		subs := []string{""}
		if k.hasStatus {
			subs = append(subs, "status")
		}
		for _, sub := range subs {
			for _, manager := range []string{"creator", fmt.Sprint("w", bi)} {
				for _, n := range changes(k, live, r, sub, p, bi) {
					u := anUpdate{sub: sub, manager: manager, live: live, obj: n}
					ups = append(ups, u, anUpdate{sub: sub, manager: manager, live: mapValues(live), obj: mapValues(n)})
				}
			}
		}
	}
	return ups
}

// randomObject is an object of k filled at random with density p, named,
// with a uid and no managedFields.
func randomObject(k *kind, r *rand.Rand, p float64, i int) runtime.Object {
	o := k.newObj()
	fillRandom(reflect.ValueOf(o).Elem(), r, p, 0, new(int))
	m := objectMeta(o)
	m.Name, m.UID, m.ManagedFields = fmt.Sprint("obj-", i), "uid-1", nil
	if m.Labels == nil && r.IntN(2) == 0 {
		m.Labels = map[string]string{"app": "a"}
	}
	return o
}

// keepMeta gives next live's name, uid and managedFields.
func keepMeta(next, live runtime.Object) {
	n, l := objectMeta(next), objectMeta(live)
	n.Name, n.UID, n.ManagedFields = l.Name, l.UID, l.ManagedFields
}

// applyRandom is live after a forced apply of a random part of an object
// by "applier", or nil when the field manager refuses it.
func applyRandom(t testing.TB, k *kind, live runtime.Object, r *rand.Rand) runtime.Object {
	part := k.newObj()
	fillRandom(reflect.ValueOf(part).Elem(), r, 0.2, 0, new(int))
	pm := objectMeta(part)
	*pm = metav1.ObjectMeta{Name: objectMeta(live).Name, Labels: map[string]string{"applied": "x"}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(part)
	if err != nil {
		return nil
	}
	applied := &unstructured.Unstructured{Object: u}
	applied.SetGroupVersionKind(k.gvk)
	fm, err := k.fieldManager("")
	if err != nil {
		t.Fatal(err)
	}
	l := live.DeepCopyObject()
	l.GetObjectKind().SetGroupVersionKind(k.gvk)
	out, err := fm.Apply(l, applied, "applier", true)
	if err != nil {
		return nil
	}
	typed := k.newObj()
	if uo, ok := out.(*unstructured.Unstructured); ok {
		if runtime.DefaultUnstructuredConverter.FromUnstructured(uo.Object, typed) != nil {
			return nil
		}
		out = typed
	}
	if reflect.TypeOf(out) != reflect.TypeOf(live) {
		return nil
	}
	keepUID := objectMeta(out)
	keepUID.UID = objectMeta(live).UID
	return out
}

// changes are written objects over live: values changed outside lists,
// inside lists, fields dropped, a rewrite, a label added, unchanged; for
// the main resource also managedFields left out and reset. A status
// write changes only status, as the server's status writes do.
func changes(k *kind, live runtime.Object, r *rand.Rand, sub string, p float64, i int) []runtime.Object {
	var out []runtime.Object
	add := func(n runtime.Object) {
		if sub == "status" {
			s := live.DeepCopyObject()
			reflect.ValueOf(s).Elem().FieldByName("Status").Set(reflect.ValueOf(n).Elem().FieldByName("Status"))
			n = s
		}
		out = append(out, n)
	}
	c := func(f func(v reflect.Value)) {
		n := live.DeepCopyObject()
		f(reflect.ValueOf(n).Elem())
		keepMeta(n, live)
		add(n)
	}
	c(func(v reflect.Value) { perturb(v, r) })
	c(func(v reflect.Value) { perturbWith(v, r, perturbing{lists: true}) })
	c(func(v reflect.Value) { perturbWith(v, r, perturbing{zero: 0.2}) })
	for _, some := range []float64{0.05, 0.1, 0.3} { // a few values changed
		c(func(v reflect.Value) { perturbWith(v, r, perturbing{some: some}) })
		c(func(v reflect.Value) { perturbWith(v, r, perturbing{lists: true, some: some}) })
	}
	c(func(v reflect.Value) {
		fresh := randomObject(k, r, p, i)
		v.Set(reflect.ValueOf(fresh).Elem())
	})
	c(func(v reflect.Value) {})
	label := live.DeepCopyObject()
	m := objectMeta(label)
	m.Labels = map[string]string{"added": "1"}
	for k, v := range objectMeta(live).Labels {
		m.Labels[k] = v
	}
	add(label)
	if sub == "" {
		none := live.DeepCopyObject()
		objectMeta(none).ManagedFields = nil
		perturb(reflect.ValueOf(none).Elem(), r)
		objectMeta(none).Name, objectMeta(none).UID = objectMeta(live).Name, objectMeta(live).UID
		out = append(out, none)
		reset := live.DeepCopyObject()
		objectMeta(reset).ManagedFields = []metav1.ManagedFieldsEntry{}
		out = append(out, reset)
	}
	return out
}

// mapValues is obj with every value mapped one way that keeps equal
// values equal, different ones different and zero ones zero: strings
// get a suffix, numbers are tripled, times move by an hour; its
// managedFields' times move by two hours (their order against now may
// change). Map keys, booleans, quantities and self-marshaling values
// stay.
func mapValues(obj runtime.Object) runtime.Object {
	c := obj.DeepCopyObject()
	m := objectMeta(c)
	mf := m.ManagedFields
	m.ManagedFields = nil
	mapValue(reflect.ValueOf(c).Elem())
	for i := range mf {
		if mf[i].Time != nil {
			mf[i].Time = &metav1.Time{Time: mf[i].Time.Add(2 * time.Hour)}
		}
	}
	m.ManagedFields = mf
	return c
}

func mapValue(v reflect.Value) {
	t := v.Type()
	switch x := v.Interface().(type) {
	case metav1.Time:
		if !x.IsZero() {
			v.Set(reflect.ValueOf(metav1.NewTime(x.Add(time.Hour))))
		}
		return
	case metav1.MicroTime:
		if !x.IsZero() {
			v.Set(reflect.ValueOf(metav1.NewMicroTime(x.Add(time.Hour))))
		}
		return
	case intstr.IntOrString:
		if x.Type == intstr.Int {
			x.IntVal *= 3
		} else if x.StrVal != "" {
			x.StrVal += "~"
		}
		v.Set(reflect.ValueOf(x))
		return
	}
	if classOf(t) != byKind {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			if v.Kind() == reflect.Interface {
				c := reflect.New(v.Elem().Type()).Elem()
				c.Set(v.Elem())
				mapValue(c)
				v.Set(c)
				return
			}
			mapValue(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				mapValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			mapValue(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			c := reflect.New(t.Elem()).Elem()
			c.Set(it.Value())
			mapValue(c)
			v.SetMapIndex(it.Key(), c)
		}
	case reflect.String:
		if v.Len() > 0 {
			v.SetString(v.String() + "~")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() * 3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() * 3)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() * 3)
	}
}

// FuzzUpdateMemo decodes a stored pod and a written one from JSON (or,
// when the input is not that, fills them at random from the seed): the
// stored one is created by "creator", then written by the seed's
// manager, of the main resource or status; the update and its twin
// (mapValues) get the field manager's answer from trackUpdate, and the
// same answer when the memo takes them as one.
func FuzzUpdateMemo(f *testing.F) {
	for _, s := range [][2]string{
		{`{"metadata":{"name":"a","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
			`{"metadata":{"name":"a","labels":{"app":"y"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`},
		{`{"metadata":{"name":"a"},"status":{"phase":"Pending"}}`,
			`{"metadata":{"name":"a"},"status":{"phase":"Pending","resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"a-gpu-x"}]}}`},
		{`{"metadata":{"name":"a"},"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"PodScheduled","status":"True"}]}}`,
			`{"metadata":{"name":"a"},"status":{"conditions":[{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"True"}],"startTime":"2026-01-01T00:00:00Z"}}`},
		{`{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80},{"containerPort":81}]}]}}`,
			`{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","ports":[{"containerPort":81},{"containerPort":82}]}]}}`},
		{`{"metadata":{"name":"a","labels":{"a":"1","b":"2"}},"spec":{"nodeSelector":{"x":"1"}}}`,
			`{"metadata":{"name":"a","labels":{"a":"2"},"managedFields":[]},"spec":{"nodeSelector":{"x":"1","y":""}}}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), uint64(1))
		f.Add([]byte(s[0]), []byte(s[1]), uint64(2))
	}
	f.Add([]byte{200}, []byte{200}, uint64(3)) // random pods
	f.Add([]byte{60}, []byte{120}, uint64(4))
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	if _, err := k.fieldManager(""); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, seed uint64) {
		var pa, pb corev1.Pod
		reset := false
		if json.Unmarshal(a, &pa) != nil || json.Unmarshal(b, &pb) != nil {
			pa, pb = corev1.Pod{}, corev1.Pod{}
			r := rand.New(rand.NewPCG(seed, uint64(len(a))))
			fillRandom(reflect.ValueOf(&pa).Elem(), r, density(a), 0, new(int))
			fillRandom(reflect.ValueOf(&pb).Elem(), r, density(b), 0, new(int))
			pb.ManagedFields = nil
		} else {
			reset = pb.ManagedFields != nil && len(pb.ManagedFields) == 0
		}
		pa.ManagedFields = nil
		pa.Name, pa.UID = "a", "uid-1"
		live := storedBy(t, k, "", k.newObj(), &pa, "creator")
		sub := []string{"", "status"}[seed%2]
		if sub == "status" {
			n := live.DeepCopy()
			n.Status = pb.Status
			pb = *n
		} else {
			mf := live.ManagedFields
			if reset {
				mf = []metav1.ManagedFieldsEntry{}
			}
			pb.Name, pb.UID, pb.ManagedFields = live.Name, live.UID, mf
		}
		manager := []string{"creator", "other"}[seed/2%2]
		resetUpdateMemo(k)
		ups := []anUpdate{
			{sub: sub, manager: manager, live: live, obj: &pb},
			{sub: sub, manager: manager, live: mapValues(live), obj: mapValues(&pb)},
		}
		checkUpdateMemo(t, k, append(ups, ups...))
	})
}

// TestUpdateMemoCases checks the memo against the field manager on
// updates made to differ in one thing the answer depends on: a time or
// a quantity changed or only rewritten (1 → 1000m is no change), a
// condition changed or not, ten Update entries whose times order them
// otherwise (the oldest are merged), entries reset or not; and that the
// claim controller's write of pods' resourceClaimStatuses (another
// claim name each) hits.
func TestUpdateMemoCases(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	resetUpdateMemo(k)
	pod := func(i int) *corev1.Pod {
		p := newPod()
		p.Name, p.UID = fmt.Sprint("p", i), types.UID(fmt.Sprint("uid-", i))
		p.Spec.Containers[1].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, StartTime: &metav1.Time{Time: time.Unix(100, 0)},
			Conditions: []corev1.PodCondition{{Type: "PodScheduled", Status: "False"}}}
		return storedBy(t, k, "", k.newObj(), p, "creator")
	}
	with := func(p *corev1.Pod, f func(p *corev1.Pod)) *corev1.Pod { c := p.DeepCopy(); f(c); return c }
	var ups []anUpdate
	add := func(sub, manager string, live, obj runtime.Object) {
		ups = append(ups, anUpdate{sub: sub, manager: manager, live: live, obj: obj})
	}
	for i := range 2 {
		p := pod(i)
		add("status", "node", p, with(p, func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: time.Unix(200, 0)} }))
		add("status", "node", p, with(p, func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: time.Unix(100, 0)} }))
		add("status", "node", p, with(p, func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: time.Unix(100, 5e8)} }))
		add("", "kubectl", p, with(p, func(p *corev1.Pod) {
			p.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000m")
		}))
		add("", "kubectl", p, with(p, func(p *corev1.Pod) {
			p.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}))
		add("status", "scheduler", p, with(p, func(p *corev1.Pod) { p.Status.Conditions[0].Status = "True" }))
		add("status", "scheduler", p, with(p, func(p *corev1.Pod) { p.Status.Conditions[0].Reason = "Unschedulable" }))
		add("status", "scheduler", p, with(p, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }))
		// containerStatuses is an atomic list: one leaf, compared by
		// reflect.DeepEqual (an empty list is not a missing one, though
		// their JSON is the same).
		running := with(p, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", ContainerID: fmt.Sprint("fake://", i)}}
		})
		add("status", "node", running, with(running, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].AllocatedResourcesStatus = []corev1.ResourceStatus{}
		}))
		add("status", "node", running, with(running, func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = true }))
		add("status", "node", running, with(running, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }))
		add("", "kubectl", p, with(p, func(p *corev1.Pod) { p.ManagedFields = []metav1.ManagedFieldsEntry{} }))
		add("", "kubectl", p, with(p, func(p *corev1.Pod) { p.ManagedFields = nil }))
	}
	// Ten Update entries, each owning a label, and the same entries with
	// their times in the reverse order (a list the field manager would
	// not have sorted so, but the memo must not assume it): an eleventh
	// writer's update merges the two oldest into ancient-changes.
	p := pod(9)
	for j := range 10 {
		next := p.DeepCopy()
		next.Labels[fmt.Sprint("l", j)] = "v"
		p = storedBy(t, k, "", p, next, fmt.Sprint("m", j))
	}
	reversed := p.DeepCopy()
	for e := range p.ManagedFields {
		p.ManagedFields[e].Time = &metav1.Time{Time: time.Unix(int64(1000+e*10), 0)}
		reversed.ManagedFields[e].Time = &metav1.Time{Time: time.Unix(int64(1000-e*10), 0)}
	}
	for _, p := range []*corev1.Pod{p, reversed} {
		add("", "eleventh", p, with(p, func(p *corev1.Pod) { p.Labels["new"] = "v" }))
	}
	pairs, hits := checkUpdateMemo(t, k, ups)
	t.Logf("%d updates, %d pairs taken as one, %d hits", len(ups), pairs, hits)

	// A list inside an atomic struct (a claim's allocation.nodeSelector)
	// is compared as the comparison compares it, by reflect.DeepEqual:
	// a term's values made an empty list from none is a change, though
	// the JSON is the same.
	claims := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	resetUpdateMemo(claims)
	claim := storedClaim(t, claims)
	claim.Status.Allocation.NodeSelector = &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{
		MatchExpressions: []kcorev1.NodeSelectorRequirement{{Key: "zone", Operator: kcorev1.NodeSelectorOpExists}}}}}
	moved := func(c *resourcev1.ResourceClaim) { c.Status.Allocation.Devices.Results[0].Device = "gpu-1" }
	withClaim := func(f ...func(c *resourcev1.ResourceClaim)) runtime.Object {
		c := claim.DeepCopy()
		for _, f := range f {
			f(c)
		}
		return c
	}
	var claimUps []anUpdate
	for range 2 {
		claimUps = append(claimUps,
			anUpdate{sub: "status", manager: "scheduler", live: claim, obj: withClaim(moved)},
			anUpdate{sub: "status", manager: "scheduler", live: claim, obj: withClaim(moved, func(c *resourcev1.ResourceClaim) {
				c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{}
			})})
	}
	pairs, hits = checkUpdateMemo(t, claims, claimUps)
	t.Logf("claims: %d updates, %d pairs taken as one, %d hits", len(claimUps), pairs, hits)

	// The claim controller's write and the node's: hits from the second
	// pod on.
	resetUpdateMemo(k)
	for i := range 8 {
		p := pod(i / 2)
		u := anUpdate{sub: "status", manager: "resourceclaim-controller", live: p, obj: with(p, func(p *corev1.Pod) {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo(fmt.Sprint("p", i, "-gpu-", 7*i))}}
		})}
		if i%2 == 1 {
			u = anUpdate{sub: "status", manager: "node", live: p, obj: with(p, func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, ContainerID: fmt.Sprint("fake://", i), Started: ptrTo(true),
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(int64(100+i), 0)}}}}
			})}
		}
		want := libraryUpdate(t, k, u)
		got, hit := memoUpdate(t, k, u)
		if got != want {
			t.Errorf("pod %d: trackUpdate answers\n%s\nthe field manager\n%s", i, got, want)
		}
		if hit != (i > 1) {
			t.Errorf("pod %d: hit %v", i, hit)
		}
	}
}

// Updates of several shapes by one manager at once (run with -race):
// each gets the field manager's answer for its own.
func TestUpdateMemoConcurrent(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	live := storedPod(t, k)
	ups := make([]anUpdate, updateShapes+2) // more than the memo keeps per manager
	want := make([]string, len(ups))
	for i := range ups {
		obj := live.DeepCopy()
		obj.Status.Conditions = append(obj.Status.Conditions, corev1.PodCondition{Type: corev1.PodConditionType(fmt.Sprint("c", i)), Status: "True"})
		ups[i] = anUpdate{sub: "status", manager: "memo-concurrent", live: live, obj: obj}
		want[i] = libraryUpdate(t, k, ups[i])
	}
	errs := make(chan string, 8*60)
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := range 60 {
				i := (g + n) % len(ups)
				out, err := testAPI.trackUpdate(k, "status", live.DeepCopy(), ups[i].obj.DeepCopyObject(), "memo-concurrent")
				if err != nil {
					errs <- err.Error()
					continue
				}
				if got := entriesOf(t, out, live); got != want[i] {
					errs <- fmt.Sprintf("update %d: got\n%s\nwant\n%s", i, got, want[i])
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
