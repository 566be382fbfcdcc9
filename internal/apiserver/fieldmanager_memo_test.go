package apiserver

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	corev1 "allot.dev/allot/api/core/v1"
)

// libraryCreate is the field manager's own answer for obj's creation by
// manager, time left out.
func libraryCreate(t testing.TB, k *kind, obj runtime.Object, manager string) string {
	t.Helper()
	fm, err := k.fieldManager("")
	if err != nil {
		t.Fatal(err)
	}
	live, o := k.newObj(), obj.DeepCopyObject()
	live.GetObjectKind().SetGroupVersionKind(k.gvk)
	o.GetObjectKind().SetGroupVersionKind(k.gvk)
	return entriesWithoutTime(mustAccessor(t, fm.UpdateNoErrors(live, o, manager)).GetManagedFields())
}

// memoCreate is trackCreate's answer (through the memo), time left out;
// it checks the time is the field manager's: now, in UTC.
func memoCreate(t testing.TB, k *kind, obj runtime.Object, manager string) string {
	t.Helper()
	before := time.Now()
	out, err := testAPI.trackCreate(k, obj.DeepCopyObject(), manager)
	if err != nil {
		t.Fatal(err)
	}
	entries := mustAccessor(t, out).GetManagedFields()
	_, custom := out.(*unstructured.Unstructured)
	if custom {
		// An unstructured object holds its times as text, in seconds.
		before = before.Truncate(time.Second)
	}
	for _, e := range entries {
		if e.Time == nil || (!custom && e.Time.Location() != time.UTC) || e.Time.Time.Before(before) || e.Time.Time.After(time.Now()) {
			t.Errorf("%s: entry time %v, want now in UTC", k.gvk.Kind, e.Time)
		}
	}
	return entriesWithoutTime(entries)
}

// checkMemo compares, for objects of one kind, the memo's shape rule with
// the field manager: objects of the same shape must get the same
// managedFields, and the memo's answer for each must be the library's.
// perturbed[i] is objs[i] with other values of the same shape.
func checkMemo(t *testing.T, k *kind, objs []runtime.Object, manager string) (hits int) {
	t.Helper()
	answers := make([]string, len(objs))
	for i, o := range objs {
		answers[i] = libraryCreate(t, k, o, manager)
	}
	for i := range objs {
		for j := i + 1; j < len(objs); j++ {
			if !sameShape(shapeValue(objs[i]), shapeValue(objs[j])) {
				continue
			}
			hits++
			if answers[i] != answers[j] {
				a, _ := json.Marshal(objs[i])
				b, _ := json.Marshal(objs[j])
				t.Errorf("%s: objects of one shape, different managedFields:\n%s\n-> %s\n%s\n-> %s", k.gvk.Kind, a, answers[i], b, answers[j])
			}
		}
	}
	for i, o := range objs {
		if got := memoCreate(t, k, o, manager); got != answers[i] {
			j, _ := json.Marshal(o)
			t.Errorf("%s: memo answers\n%s\nthe field manager\n%s\nfor %s", k.gvk.Kind, got, answers[i], j)
		}
	}
	return hits
}

// TestCreateMemoAgreesWithTheFieldManager fills objects of every built-in
// kind at random (each field present with a probability, the rest zero,
// custom-marshaled types included), each with two copies of other values
// of the same shape; every pair the memo takes for one shape gets the
// same managedFields from the field manager, and the memo's answers
// through trackCreate (hits and misses) are the field manager's.
func TestCreateMemoAgreesWithTheFieldManager(t *testing.T) {
	served := 0
	for ki, bk := range builtinKinds() {
		k := testAPI.reg.get(bk.gvk.GroupVersion().WithResource(bk.resource))
		if k == nil || k.fm == nil {
			continue
		}
		if _, ok := k.newObj().(*unstructured.Unstructured); ok {
			continue
		}
		served++
		r := rand.New(rand.NewPCG(uint64(ki), 26))
		var objs []runtime.Object
		tracked := 0
		for _, p := range []float64{1, 0.9, 0.7, 0.5, 0.3, 0.15, 0.05, 0} {
			o := k.newObj()
			fillRandom(reflect.ValueOf(o).Elem(), r, p, 0, new(int))
			for range 2 {
				c := o.DeepCopyObject()
				perturb(reflect.ValueOf(c).Elem(), r)
				if !sameShape(reflect.ValueOf(o), reflect.ValueOf(c)) {
					j, _ := json.Marshal(o)
					t.Fatalf("%s: a copy with other values of the same shape is not taken as the same shape: %s", k.gvk.Kind, j)
				}
				objs = append(objs, c)
			}
			for _, how := range []perturbing{{lists: true}, {zero: 0.05}} {
				c := o.DeepCopyObject()
				perturbWith(reflect.ValueOf(c).Elem(), r, how)
				objs = append(objs, c)
			}
			objs = append(objs, o)
			objs = append(objs, reowned(o, r)...)
			if libraryCreate(t, k, o, "m") != "" {
				tracked++
			}
		}
		if tracked < 4 {
			t.Errorf("%s: the field manager tracked only %d of the random objects; the test fills them wrongly", k.gvk.Kind, tracked)
		}
		hits := checkMemo(t, k, objs, "memo-test-"+k.gvk.Kind)
		t.Logf("%s: %d objects, %d tracked, %d pairs of one shape", k.gvk.Kind, len(objs), tracked, hits)
		if hits < 16 {
			t.Errorf("%s: only %d pairs of one shape", k.gvk.Kind, hits)
		}
	}
	if served < 10 {
		t.Errorf("only %d built-in kinds checked", served)
	}
}

// reowned is copies of o (when it has owners of its own) whose owners
// have other uids: fresh plain ones, in the same order among themselves
// as o's or not, with other values of the same shape; o's owners
// reversed; and one owner's uid made unplain.
func reowned(o runtime.Object, r *rand.Rand) []runtime.Object {
	om := objectMeta(o)
	if om == nil || len(om.OwnerReferences) == 0 {
		return nil
	}
	var out []runtime.Object
	for n := range 3 {
		c := o.DeepCopyObject()
		cm := objectMeta(c)
		for i := range cm.OwnerReferences {
			cm.OwnerReferences[i].UID = types.UID(fmt.Sprintf("%d-%d-%d", r.IntN(1000), n, i))
			if n == 2 && cm.OwnerReferences[i].Name != "" {
				cm.OwnerReferences[i].Name += "-other"
			}
		}
		out = append(out, c)
	}
	c := o.DeepCopyObject()
	cm := objectMeta(c)
	slices.Reverse(cm.OwnerReferences)
	out = append(out, c)
	c = o.DeepCopyObject()
	cm = objectMeta(c)
	cm.OwnerReferences[0].UID = `a"b\u00e9<`
	return append(out, c)
}

// TestCreateMemoOwnerUIDs checks the memo's answers for objects whose
// only difference is their owners' uids (the keys of
// metadata.ownerReferences) against the field manager's: claims made
// from a template (one owner, several), owners reordered, uids that sort
// otherwise, unplain or repeated uids, an owner's field dropped, a
// template's owners inside a PodTemplate; and that the claims of one
// template hit.
func TestCreateMemoOwnerUIDs(t *testing.T) {
	claims := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	templates := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaimtemplates"))
	uid := func(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i*7919, i) }
	type step struct {
		obj  runtime.Object
		hits bool // the memo answers it (rewriting uids where they differ)
	}
	noController := templateClaim(9, uid(9))
	noController.OwnerReferences[0].Controller = nil
	podTemplate := func(owner string) runtime.Object {
		p := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "default"}}
		p.Spec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: types.UID(owner)}}
		p.Spec.Spec = v1Claim("c").Spec
		return p
	}
	for _, tc := range []struct {
		name  string
		k     *kind
		steps []step
	}{
		{"one owner", claims, []step{
			{templateClaim(0, uid(1)), false},
			{templateClaim(1, uid(2)), true},
			{templateClaim(2, "0"), true},
			{templateClaim(3, "zzz.9_x"), true},
			{templateClaim(4, uid(1)), true},
		}},
		{"several owners", claims, []step{
			{templateClaim(0, "b", "d", "f"), false},
			{templateClaim(1, "c", "e", "g"), true},
			{templateClaim(2, "a", "b", "c"), true},
			{templateClaim(3, "b", "a", "c"), false}, // another order among them
			{templateClaim(4, "c", "b", "d"), true},  // as the last stored
			{templateClaim(5, "x", "x", "y"), false}, // repeated
			{templateClaim(6, "c", "e"), false},
		}},
		{"reordered owners", claims, []step{
			{templateClaim(0, "u1", "u2"), false},
			{templateClaim(0, "u2", "u1"), false},
			{templateClaim(0, "u3", "u4"), true},
		}},
		{"unplain uids", claims, []step{
			{templateClaim(0, "u1"), false},
			{templateClaim(1, `u"2`), false},
			{templateClaim(2, "ué"), false},
			{templateClaim(3, ""), false},
			{templateClaim(4, "u5"), true},
		}},
		{"an owner's field dropped", claims, []step{
			{templateClaim(0, uid(0)), false},
			{noController, false},
			{templateClaim(1, uid(1)), true},
		}},
		{"a template's owners", templates, []step{
			{podTemplate("a"), false},
			{podTemplate("b"), false},
			{podTemplate("a"), true}, // the same uids
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manager := "memo-owners-" + tc.name
			m := &tc.k.fm.creates
			for i, s := range tc.steps {
				s.obj.GetObjectKind().SetGroupVersionKind(tc.k.gvk) // as trackCreate does
				e, rewrite := m.lookup(manager, s.obj)
				if hit := e != nil; hit != s.hits {
					t.Errorf("step %d: hit %v (rewrite %v), want %v", i, e != nil, rewrite, s.hits)
				}
				if got, want := memoCreate(t, tc.k, s.obj, manager), libraryCreate(t, tc.k, s.obj, manager); got != want {
					t.Errorf("step %d: memo answers\n%s\nthe field manager\n%s", i, got, want)
				}
			}
		})
	}
}

// The owners' comparison (ownersMatch) names every field of an owner
// reference; a new one must be added to it.
func TestCreateMemoOwnerFields(t *testing.T) {
	if n := reflect.TypeFor[metav1.OwnerReference]().NumField(); n != 6 {
		t.Errorf("metav1.OwnerReference has %d fields, ownersMatch compares 6", n)
	}
}

// TestCreateMemoCustomResources is the same check for a custom resource
// (an atomic map, a keyed list): random objects and copies of them with
// other scalar values.
func TestCreateMemoCustomResources(t *testing.T) {
	k := listMapKind(t, "memowidgets")
	r := rand.New(rand.NewPCG(1, 26))
	var objs []runtime.Object
	for range 24 {
		spec := map[string]any{}
		if r.IntN(2) == 0 {
			spec["size"] = []string{"", "s", "m"}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			sel := map[string]any{}
			for range r.IntN(3) {
				sel[[]string{"a", "b"}[r.IntN(2)]] = []string{"", "x"}[r.IntN(2)]
			}
			spec["selector"] = sel
		}
		if r.IntN(2) == 0 {
			var ports []any
			for i := range r.IntN(3) {
				ports = append(ports, map[string]any{"name": fmt.Sprint("p", i), "port": int64(r.IntN(2) * 80)})
			}
			spec["ports"] = ports
		}
		if r.IntN(3) == 0 {
			spec["extra"] = []any{nil, "", "x", int64(1), true, map[string]any{}}[r.IntN(6)]
		}
		o := map[string]any{"apiVersion": "apply.example.com/v1", "kind": "Memowidget",
			"metadata": map[string]any{"name": fmt.Sprint("w", r.IntN(3)), "namespace": "default"}}
		if r.IntN(4) != 0 {
			o["spec"] = spec
		}
		u := &unstructured.Unstructured{Object: o}
		c := u.DeepCopy()
		perturb(reflect.ValueOf(c.Object), r)
		if !sameShape(shapeValue(u), shapeValue(c)) {
			t.Fatalf("a copy with other values is not taken as the same shape: %v", o)
		}
		objs = append(objs, u, c)
	}
	if hits := checkMemo(t, k, objs, "memo-test"); hits < 24 {
		t.Errorf("only %d pairs of one shape", hits)
	}
}

// TestCreateMemoShapes pins what makes two pods one shape.
func TestCreateMemoShapes(t *testing.T) {
	base := func() *corev1.Pod {
		p := makePod("a").label("app", "web").obj()
		p.Namespace, p.UID, p.CreationTimestamp = "default", "u1", metav1.Now()
		return p
	}
	for _, tc := range []struct {
		name string
		f    func(p *corev1.Pod)
		same bool
	}{
		{"other name, uid, label value, time", func(p *corev1.Pod) {
			p.Name, p.UID, p.Labels["app"] = "b", "u2", "db"
			p.CreationTimestamp = metav1.NewTime(p.CreationTimestamp.Add(time.Hour))
		}, true},
		{"a label more", func(p *corev1.Pod) { p.Labels["x"] = "1" }, false},
		{"a label value emptied", func(p *corev1.Pod) { p.Labels["app"] = "" }, false},
		{"other label key", func(p *corev1.Pod) { delete(p.Labels, "app"); p.Labels["b"] = "web" }, false},
		{"nodeName set", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false},
		{"other container image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx" }, false},
		{"empty labels map", func(p *corev1.Pod) { p.Labels = map[string]string{} }, false},
		{"annotations nil vs empty", func(p *corev1.Pod) { p.Annotations = map[string]string{} }, false},
		{"a quantity set", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, false},
	} {
		a, b := base(), base()
		tc.f(b)
		if got := sameShape(reflect.ValueOf(a), reflect.ValueOf(b)); got != tc.same {
			t.Errorf("%s: same shape %v, want %v", tc.name, got, tc.same)
		}
	}
	q := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	na, nb := makeNode("a", nil), makeNode("b", nil)
	na.Status.Capacity, nb.Status.Capacity = q("1"), q("2")
	if !sameShape(reflect.ValueOf(na), reflect.ValueOf(nb)) {
		t.Errorf("quantities 1 and 2 outside a list: not one shape")
	}
	nb.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}}
	if sameShape(reflect.ValueOf(na), reflect.ValueOf(nb)) {
		t.Errorf("quantities 1 and zero: one shape")
	}
	x, y := intstr.FromInt32(1), intstr.FromString("1")
	if sameShape(reflect.ValueOf(x), reflect.ValueOf(y)) {
		t.Errorf("IntOrString 1 and \"1\": one shape")
	}
}

// TestCreateMemoSkips checks that a create with managedFields of its own
// or a last-applied annotation, and the field manager's empty answers,
// are not remembered, and that the memo is bounded.
func TestCreateMemoSkips(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	m := &k.fm.creates
	p := makePod("skip").obj()
	p.Namespace = "default"
	own := p.DeepCopy()
	own.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "other", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:nodeName":{}}}`)}}}
	applied := p.DeepCopy()
	applied.Annotations = map[string]string{lastAppliedAnnotation: "{}"}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "default"}}
	for _, o := range []*corev1.Pod{own, applied, bare} {
		if got, want := memoCreate(t, k, o, "memo-skip"), libraryCreate(t, k, o, "memo-skip"); got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	}
	if memoHas(m, "memo-skip", own) || memoHas(m, "memo-skip", applied) || memoHas(m, "memo-skip", bare) {
		t.Errorf("remembered a create it must leave to the field manager")
	}
	memoCreate(t, k, p, "memo-skip")
	if !memoHas(m, "memo-skip", p) {
		t.Errorf("a plain create is not remembered")
	}
	for i := range memoManagers + 1 {
		memoCreate(t, k, p, fmt.Sprint("memo-bound-", i))
	}
	m.mu.RLock()
	n := len(m.byManager)
	m.mu.RUnlock()
	if n > memoManagers {
		t.Errorf("%d managers remembered, bound %d", n, memoManagers)
	}
}

// FuzzCreateMemo decodes two pods from JSON (or, when the input is not
// that, fills two pods at random from the seed): each and a copy with
// other values of its shape get one answer from the field manager, and
// so do the two when the memo takes them for one shape; the memo's
// answer is the field manager's.
func FuzzCreateMemo(f *testing.F) {
	for _, s := range [][2]string{
		{`{"metadata":{"name":"a","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
			`{"metadata":{"name":"b","labels":{"app":"y"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
		{`{"metadata":{"generateName":"rs-","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u"}]},"spec":{"nodeSelector":{"a":""},"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}`,
			`{"metadata":{"generateName":"rs-","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"v"}]},"spec":{"nodeSelector":{"a":"b"},"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}`},
		{`{"metadata":{"name":"a","annotations":{}},"spec":{"priority":0,"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"}]}}`,
			`{"metadata":{"name":"a"},"spec":{"priority":1,"resourceClaims":[{"name":"gpu","resourceClaimName":"t"}]}}`},
		{`{"metadata":{"name":"a"},"spec":{"nodeName":"","hostNetwork":true,"terminationGracePeriodSeconds":0}}`,
			`{"metadata":{"name":"a"},"spec":{"nodeName":"n","hostNetwork":false,"terminationGracePeriodSeconds":30}}`},
		{`{"metadata":{"name":"a"},"status":{"phase":"Pending","startTime":"2026-01-01T00:00:00Z"}}`, `{}`},
		{`{"metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u1","controller":true},{"apiVersion":"v1","kind":"Node","name":"n","uid":"u0"}]}}`,
			`{"metadata":{"name":"b","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"q","uid":"u3","controller":false},{"apiVersion":"v1","kind":"Node","name":"m","uid":"u2"}]}}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), uint64(1))
	}
	f.Add([]byte{200}, []byte{200}, uint64(2)) // random pods
	f.Add([]byte{40}, []byte{90}, uint64(3))
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	f.Fuzz(func(t *testing.T, a, b []byte, seed uint64) {
		var pa, pb corev1.Pod
		if json.Unmarshal(a, &pa) != nil || json.Unmarshal(b, &pb) != nil {
			// Not two pods: random pods of the seed, filled as densely
			// as a's first byte says, b's first byte for the second.
			pa, pb = corev1.Pod{}, corev1.Pod{}
			r := rand.New(rand.NewPCG(seed, uint64(len(a))))
			fillRandom(reflect.ValueOf(&pa).Elem(), r, density(a), 0, new(int))
			fillRandom(reflect.ValueOf(&pb).Elem(), r, density(b), 0, new(int))
		}
		if len(pa.ManagedFields) > 0 || len(pb.ManagedFields) > 0 {
			return
		}
		ca := pa.DeepCopy()
		perturb(reflect.ValueOf(ca).Elem(), rand.New(rand.NewPCG(seed, 26)))
		if !sameShape(reflect.ValueOf(&pa), reflect.ValueOf(ca)) {
			t.Fatalf("a copy with other values is not taken as the same shape: %s", a)
		}
		objs := []runtime.Object{&pa, ca, &pb}
		checkMemo(t, k, append(objs, reowned(&pa, rand.New(rand.NewPCG(seed, 27)))...), fmt.Sprint("memo-fuzz-", seed%4))
	})
}

// density is a probability from data's first byte.
func density(data []byte) float64 {
	if len(data) == 0 {
		return 0.5
	}
	return float64(data[0]) / 255
}

// fillRandom fills v (settable) at random: each field, element or key
// present with probability p (lists and maps of one or two), scalars set
// to small values; the custom-marshaled types to valid values. budget
// bounds the nodes of recursive types (JSON schemas).
func fillRandom(v reflect.Value, r *rand.Rand, p float64, depth int, budget *int) {
	if depth > 10 || *budget > 3000 {
		return
	}
	*budget++
	coin := func() bool { return r.Float64() < p }
	switch v.Interface().(type) {
	case metav1.Time:
		if coin() {
			v.Set(reflect.ValueOf(metav1.Unix(r.Int64N(1e9)+1, 0)))
		}
		return
	case metav1.MicroTime:
		if coin() {
			v.Set(reflect.ValueOf(metav1.NewMicroTime(time.Unix(r.Int64N(1e9)+1, 0))))
		}
		return
	case resource.Quantity:
		if coin() {
			v.Set(reflect.ValueOf(resource.MustParse([]string{"0", "1", "100m", "2Gi"}[r.IntN(4)])))
		}
		return
	case intstr.IntOrString:
		if coin() {
			v.Set(reflect.ValueOf([]intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(3), intstr.FromString(""), intstr.FromString("a")}[r.IntN(4)]))
		}
		return
	case runtime.RawExtension:
		if coin() {
			v.Set(reflect.ValueOf(runtime.RawExtension{Raw: []byte(`{"a":1}`)}))
		}
		return
	case time.Time:
		if coin() {
			v.Set(reflect.ValueOf(time.Unix(r.Int64N(1e9)+1, 0)))
		}
		return
	}
	if classOf(v.Type()) == strict {
		return // another self-marshaling type: left zero
	}
	switch v.Kind() {
	case reflect.Pointer:
		if coin() {
			n := reflect.New(v.Type().Elem())
			fillRandom(n.Elem(), r, p, depth+1, budget)
			v.Set(n)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandom(v.Field(i), r, p, depth+1, budget)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if coin() {
				v.SetBytes([]byte("x"))
			}
			return
		}
		if coin() {
			n := reflect.MakeSlice(v.Type(), 1+r.IntN(2), 2)
			for i := range n.Len() {
				fillRandom(n.Index(i), r, max(p, 0.5), depth+1, budget)
			}
			v.Set(n)
		}
	case reflect.Map:
		if !coin() || v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range 1 + r.IntN(2) {
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(e, r, p, depth+1, budget)
			m.SetMapIndex(reflect.ValueOf([]string{"a", "b.example.com/c"}[r.IntN(2)]).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if coin() {
			v.SetString([]string{"a", "b", "x.example.com"}[r.IntN(3)])
		}
	case reflect.Bool:
		v.SetBool(coin())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if coin() {
			v.SetInt(1 + r.Int64N(3))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if coin() {
			v.SetUint(1 + r.Uint64N(3))
		}
	case reflect.Float32, reflect.Float64:
		if coin() {
			v.SetFloat(1.5)
		}
	}
}

// perturb changes, in v (settable, or a map), the values sameShape does
// not compare: scalars outside lists to other values of the same
// zero-ness, times and quantities to other non-zero ones; lists, keys and
// self-marshaling types stay.
func perturb(v reflect.Value, r *rand.Rand) { perturbWith(v, r, perturbing{}) }

// perturbing makes perturbWith change shapes too: values inside lists as
// outside (lists), and scalars, pointers and maps outside lists set to
// zero with a probability (zero).
type perturbing struct {
	lists bool
	zero  float64
	// some, when not 0, is the probability a value is changed (else
	// every one is).
	some float64
}

func perturbWith(v reflect.Value, r *rand.Rand, o perturbing) {
	t := v.Type()
	if o.some > 0 && r.Float64() >= o.some {
		switch v.Kind() {
		case reflect.Struct, reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Array:
			if c := classOf(t); c == leafZero || c == intOrStr {
				return
			}
		default:
			return
		}
	}
	if o.zero > 0 && v.CanSet() && r.Float64() < o.zero {
		switch v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64:
			v.Set(reflect.Zero(t))
			return
		}
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		if o.lists && (v.Kind() == reflect.Array || t.Elem().Kind() != reflect.Uint8) {
			for i := range v.Len() {
				perturbWith(v.Index(i), r, perturbing{lists: true, some: o.some})
			}
		}
		return
	case reflect.Pointer:
		if !v.IsNil() {
			perturbWith(v.Elem(), r, o)
		}
		return
	case reflect.Interface:
		if !v.IsNil() {
			c := reflect.New(v.Elem().Type()).Elem()
			c.Set(v.Elem())
			perturbWith(c, r, o)
			v.Set(c)
		}
		return
	}
	switch classOf(t) {
	case strict:
		return
	case leafZero:
		if isZeroLeaf(v) {
			return
		}
		switch x := v.Interface().(type) {
		case metav1.Time:
			v.Set(reflect.ValueOf(metav1.NewTime(x.Add(time.Duration(1+r.IntN(100)) * time.Hour))))
		case metav1.MicroTime:
			v.Set(reflect.ValueOf(metav1.NewMicroTime(x.Add(time.Duration(1+r.IntN(100)) * time.Microsecond))))
		case resource.Quantity:
			v.Set(reflect.ValueOf(resource.MustParse([]string{"5", "250m", "3Gi"}[r.IntN(3)])))
		}
		return
	case intOrStr:
		x := v.Interface().(intstr.IntOrString)
		if x.Type == intstr.Int && x.IntVal != 0 {
			x.IntVal = 7
		} else if x.Type == intstr.String && x.StrVal != "" {
			x.StrVal = "other"
		}
		v.Set(reflect.ValueOf(x))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				perturbWith(v.Field(i), r, o)
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			c := reflect.New(t.Elem()).Elem()
			c.Set(it.Value())
			perturbWith(c, r, o)
			v.SetMapIndex(it.Key(), c)
		}
	case reflect.String:
		if v.Len() > 0 {
			v.SetString(v.String() + fmt.Sprint("-", r.IntN(100)))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() != 0 {
			v.SetInt(int64(1 + r.IntN(100)))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() != 0 {
			v.SetUint(uint64(1 + r.IntN(100)))
		}
	case reflect.Float32, reflect.Float64:
		if v.Float() != 0 {
			v.SetFloat(float64(1 + r.IntN(100)))
		}
	}
}

// Creates of several shapes by one manager at once (run with -race): each
// gets the field manager's answer for its own shape.
func TestCreateMemoConcurrent(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	shapes := make([]*corev1.Pod, 6) // more than the memo keeps per manager
	want := make([]string, len(shapes))
	for i := range shapes {
		p := makePod(fmt.Sprint("c", i)).label(fmt.Sprint("l", i), "v").obj()
		p.Namespace = "default"
		shapes[i] = p
		want[i] = libraryCreate(t, k, p, "memo-concurrent")
	}
	errs := make(chan string, 8*60)
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := range 60 {
				i := (g + n) % len(shapes)
				out, err := testAPI.trackCreate(k, shapes[i].DeepCopy(), "memo-concurrent")
				if err != nil {
					errs <- err.Error()
					continue
				}
				if got := entriesWithoutTime(out.(*corev1.Pod).ManagedFields); got != want[i] {
					errs <- fmt.Sprintf("shape %d: got %s, want %s", i, got, want[i])
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

// A manager whose creates never share a shape (each with another label)
// stops storing every miss; a family of one shape
// arriving later still gets in and hits.
func TestCreateMemoThrottlesMisses(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	m := &k.fm.creates
	const manager = "memo-throttle"
	owned := func(i int) *corev1.Pod {
		p := makePod(fmt.Sprint("o", i)).label(fmt.Sprint("l", i), "v").obj()
		p.Namespace = "default"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprint("owner", i), UID: types.UID(fmt.Sprint("u", i))}}
		return p
	}
	stored := func() (n int) {
		m.mu.RLock()
		defer m.mu.RUnlock()
		for _, e := range m.byManager[manager].entries {
			if e != nil {
				n++
			}
		}
		return n
	}
	for i := range 3 * memoShapes {
		p := owned(i)
		if got, want := memoCreate(t, k, p, manager), libraryCreate(t, k, p, manager); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	}
	m.mu.RLock()
	before := m.byManager[manager].entries
	m.mu.RUnlock()
	p := owned(1000)
	memoCreate(t, k, p, manager)
	m.mu.RLock()
	after := m.byManager[manager].entries
	m.mu.RUnlock()
	if after != before || stored() != memoShapes {
		t.Errorf("a miss after %d misses in a row was stored", 3*memoShapes)
	}
	same := owned(2000)
	hit := false
	for range memoStoreEvery + 1 {
		if memoHas(m, manager, same) {
			hit = true
			break
		}
		if got, want := memoCreate(t, k, same, manager), libraryCreate(t, k, same, manager); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	}
	if !hit {
		t.Errorf("a shape created %d times never got into the memo", memoStoreEvery+1)
	}
}

// templateClaim is a v1 claim as the claim controller makes it from a
// template for pod i: owned by the pod (its uid a list key), labelled.
func templateClaim(i int, owners ...string) *resourcev1.ResourceClaim {
	c := v1Claim(fmt.Sprint("pod-", i, "-gpu"))
	c.Namespace = "default"
	c.Annotations = map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"}
	for j, uid := range owners {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod",
			Name: fmt.Sprint("pod-", i, "-", j), UID: types.UID(uid), Controller: ptrTo(j == 0), BlockOwnerDeletion: ptrTo(true)})
	}
	return c
}

// BenchmarkCreateMemo is trackCreate for claims made from a template
// (each owned by another pod) and for pods of a shape the memo does not
// hold while it holds memoShapes others (the lookup of a miss).
func BenchmarkCreateMemo(b *testing.B) {
	claims := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	pods := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	b.Run("claim/template", func(b *testing.B) {
		objs := make([]*resourcev1.ResourceClaim, 64)
		for i := range objs {
			objs[i] = templateClaim(i, fmt.Sprintf("%08x-0000-4000-8000-%012x", i*7919, i))
		}
		b.ReportAllocs()
		c0 := processCPU()
		for i := range b.N {
			if _, err := testAPI.trackCreate(claims, objs[i%len(objs)].DeepCopyObject(), "bench-claims"); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, c0)
	})
	b.Run("pod/lookup-miss", func(b *testing.B) {
		for i := range memoShapes {
			p := makePod(fmt.Sprint("m", i)).label(fmt.Sprint("l", i), "v").obj()
			p.Namespace = "default"
			if _, err := testAPI.trackCreate(pods, p, "bench-miss"); err != nil {
				b.Fatal(err)
			}
		}
		m := &pods.fm.creates
		for _, other := range []*corev1.Pod{
			makePod("other").label("app", "web").label("tier", "x").obj(), // labels: as many as none
			makePod("other").label("app", "web").obj(),                    // one: compared
		} {
			other.Namespace = "default"
			b.Run(fmt.Sprint("labels=", len(other.Labels)), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					if memoHas(m, "bench-miss", other) {
						b.Fatal("hit")
					}
				}
			})
		}
	})
}

// memoHas says whether the memo holds manager's answer for obj's shape.
func memoHas(m *createMemo, manager string, obj runtime.Object) bool {
	e, _ := m.lookup(manager, obj)
	return e != nil
}
