package apiserver

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1 "allot.dev/allot/api/core/v1"
)

// trackUpdate's comparison of parts (comparedParts) records the same
// managedFields as the field manager given the whole objects: the same
// managers, operations, subresources and fields, and a new time for the
// same entries. Neither the stored object nor the written one changes
// but for the written one's managedFields.
func TestComparedPartsGiveTheSameManagedFields(t *testing.T) {
	pods := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	claims := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	leases := testAPI.reg.get(gvrOf(coordinationv1.SchemeGroupVersion, "leases"))
	events := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "events"))
	widgets := listMapKind(t, "things")

	pod := storedPod(t, pods)
	claim := storedClaim(t, claims)
	lease := stored(t, leases, "", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default", UID: "u1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("a"), RenewTime: &metav1.MicroTime{Time: time.Unix(100, 0)}}})
	widget := stored(t, widgets, "", &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apply.example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "w", "namespace": "default", "uid": "u2", "labels": map[string]any{"a": "1", "b": "2"}},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80)}}, "selector": map[string]any{"x": "1"}, "size": "s"},
	}})
	event := stored(t, events, "", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default", UID: "u3"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default", UID: "p1"},
		Reason:         "Scheduled", Message: "on n1", Count: 1, Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Unix(100, 0), LastTimestamp: metav1.Unix(100, 0), ReportingController: "scheduler"})
	e := func(f func(e *corev1.Event)) runtime.Object { x := event.DeepCopy(); f(x); return x }
	untracked := pod.DeepCopy()
	untracked.ManagedFields = nil

	p := func(f func(p *corev1.Pod)) runtime.Object { c := pod.DeepCopy(); f(c); return c }
	c := func(f func(c *resourcev1.ResourceClaim)) runtime.Object { x := claim.DeepCopy(); f(x); return x }
	w := func(f func(m map[string]any)) runtime.Object { x := widget.DeepCopy(); f(x.Object); return x }
	for _, tc := range []struct {
		name      string
		k         *kind
		sub       string
		live, obj runtime.Object
	}{
		{"pod create", pods, "", pods.newObj(), newPod()},
		{"pod label added", pods, "", pod, p(func(p *corev1.Pod) { p.Labels["c"] = "3" })},
		{"pod label changed and one removed", pods, "", pod, p(func(p *corev1.Pod) { p.Labels["a"] = "9"; delete(p.Labels, "b") })},
		{"pod labels all removed", pods, "", pod, p(func(p *corev1.Pod) { p.Labels = nil })},
		{"pod labels emptied", pods, "", pod, p(func(p *corev1.Pod) { p.Labels = map[string]string{} })},
		{"pod image", pods, "", pod, p(func(p *corev1.Pod) { p.Spec.Containers[1].Image = "nginx" })},
		{"pod container added", pods, "", pod, p(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "z", Image: "busybox"})
		})},
		{"pod finalizer and owner", pods, "", pod, p(func(p *corev1.Pod) {
			p.Finalizers = []string{"f"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "n1"}}
		})},
		{"pod node name", pods, "", pod, p(func(p *corev1.Pod) { p.Spec.NodeName = "n2" })},
		// An atomic map that loses an entry is changed, not removed: the
		// equal entry left out would leave it empty, omitted.
		{"pod node selector entry removed", pods, "", pod, p(func(p *corev1.Pod) { delete(p.Spec.NodeSelector, "zone") })},
		{"pod node selector entry added", pods, "", pod, p(func(p *corev1.Pod) { p.Spec.NodeSelector["disk"] = "ssd" })},
		{"pod unchanged", pods, "", pod, pod},
		{"pod managedFields reset", pods, "", pod, p(func(p *corev1.Pod) { p.ManagedFields = []metav1.ManagedFieldsEntry{} })},
		{"pod stale managedFields", pods, "", pod, p(func(p *corev1.Pod) { p.ManagedFields = p.ManagedFields[:1]; p.Labels["a"] = "8" })},
		{"pod untracked", pods, "", untracked, func() runtime.Object { c := untracked.DeepCopy(); c.Labels["c"] = "3"; return c }()},
		{"pod status condition added", pods, "status", pod, p(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "Ready", Status: "True"})
		})},
		{"pod status condition changed", pods, "status", pod, p(func(p *corev1.Pod) { p.Status.Conditions[0].Status = "False" })},
		{"pod status condition removed", pods, "status", pod, p(func(p *corev1.Pod) { p.Status.Conditions = nil })},
		{"pod status phase and start time", pods, "status", pod, p(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.StartTime = &metav1.Time{Time: time.Unix(200, 0)}
		})},
		{"pod status container restarted", pods, "status", pod, p(func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++ })},
		{"pod status unchanged", pods, "status", pod, pod},
		{"pod status by its own writer", pods, "status", pod, p(func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.9" })},
		{"claim label", claims, "", claim, c(func(c *resourcev1.ResourceClaim) { c.Labels["x"] = "y" })},
		{"claim status devices", claims, "status", claim, c(func(c *resourcev1.ResourceClaim) {
			c.Status.Devices = append(c.Status.Devices, resourcev1.AllocatedDeviceStatus{Driver: "gpu.example.com", Pool: "n1", Device: "gpu-1"})
		})},
		{"claim status device condition", claims, "status", claim, c(func(c *resourcev1.ResourceClaim) {
			c.Status.Devices[0].Conditions[0].Reason = "Down"
		})},
		{"claim status reservation dropped", claims, "status", claim, c(func(c *resourcev1.ResourceClaim) { c.Status.ReservedFor = nil })},
		{"claim status deallocated", claims, "status", claim, c(func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation, c.Status.ReservedFor, c.Status.Devices = nil, nil, nil
		})},
		{"lease renewed", leases, "", lease, func() runtime.Object {
			l := lease.DeepCopyObject().(*coordinationv1.Lease)
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(110, 0)}
			return l
		}()},
		{"event repeated", events, "", event, e(func(e *corev1.Event) { e.Count = 2; e.LastTimestamp = metav1.Unix(110, 0) })},
		{"event object's field path", events, "", event, e(func(e *corev1.Event) { e.InvolvedObject.FieldPath = "spec" })},
		{"event related and message", events, "", event, e(func(e *corev1.Event) {
			e.Related = &corev1.ObjectReference{Kind: "Node", Name: "n1"}
			e.Message = ""
		})},
		{"custom resource entry added", widgets, "", widget, w(func(m map[string]any) {
			spec := m["spec"].(map[string]any)
			spec["ports"] = append(spec["ports"].([]any), map[string]any{"name": "https", "port": int64(443)})
		})},
		{"custom resource atomic map entry removed", widgets, "", widget, w(func(m map[string]any) {
			m["spec"].(map[string]any)["selector"] = map[string]any{}
		})},
		{"custom resource atomic map", widgets, "", widget, w(func(m map[string]any) {
			m["spec"].(map[string]any)["selector"] = map[string]any{"x": "1", "y": "2"}
		})},
		{"custom resource label", widgets, "", widget, w(func(m map[string]any) {
			m["metadata"].(map[string]any)["labels"] = map[string]any{"a": "1", "b": "3"}
		})},
		{"custom resource spec field removed", widgets, "", widget, w(func(m map[string]any) { delete(m["spec"].(map[string]any), "size") })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm, err := tc.k.fieldManager(tc.sub)
			if err != nil {
				t.Fatal(err)
			}
			live, obj := tc.live.DeepCopyObject(), tc.obj.DeepCopyObject()
			whole := fm.UpdateNoErrors(tc.live.DeepCopyObject(), tc.obj.DeepCopyObject(), "writer")
			got, err := testAPI.trackUpdate(tc.k, tc.sub, live, obj, "writer")
			if err != nil {
				t.Fatal(err)
			}
			if a, b := entriesOf(t, whole, tc.live), entriesOf(t, got, tc.live); a != b {
				t.Errorf("whole objects give\n%s\ncompared parts give\n%s", a, b)
			}
			wantLive := tc.live.DeepCopyObject()
			wantLive.GetObjectKind().SetGroupVersionKind(tc.k.gvk)
			if !reflect.DeepEqual(live, wantLive) {
				t.Errorf("the stored object changed")
			}
			want := tc.obj.DeepCopyObject()
			mustAccessor(t, want).SetManagedFields(mustAccessor(t, got).GetManagedFields())
			want.GetObjectKind().SetGroupVersionKind(tc.k.gvk)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the written object changed beyond its managedFields")
			}
		})
	}
}

// entriesOf prints obj's managedFields; a time is "kept" when the stored
// object's entry of the same manager and operation has it, else "new".
func entriesOf(t testing.TB, obj, live runtime.Object) string {
	before := map[string]*metav1.Time{}
	for _, e := range mustAccessor(t, live).GetManagedFields() {
		before[e.Manager+string(e.Operation)+e.Subresource] = e.Time
	}
	var out []string
	for _, e := range mustAccessor(t, obj).GetManagedFields() {
		when := "new"
		if e.Time == nil {
			when = "none"
		} else if b := before[e.Manager+string(e.Operation)+e.Subresource]; b != nil && b.Equal(e.Time) {
			when = "kept"
		}
		out = append(out, fmt.Sprintf("%s %s %s %s %s %s", e.Manager, e.Operation, e.Subresource, e.APIVersion, when, e.FieldsV1.Raw))
	}
	return strings.Join(out, "\n")
}

func mustAccessor(t testing.TB, obj runtime.Object) metav1.Object {
	t.Helper()
	acc, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

// stored runs obj through the field manager as its creation by
// "creator", with the time of its entry an hour back, so that a new time
// shows.
func stored[T runtime.Object](t testing.TB, k *kind, sub string, obj T) T {
	t.Helper()
	return storedBy(t, k, sub, k.newObj(), obj, "creator")
}

func storedBy[T runtime.Object](t testing.TB, k *kind, sub string, live runtime.Object, obj T, manager string) T {
	t.Helper()
	fm, err := k.fieldManager(sub)
	if err != nil {
		t.Fatal(err)
	}
	live.GetObjectKind().SetGroupVersionKind(k.gvk)
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	out := fm.UpdateNoErrors(live, obj, manager).(T)
	acc := mustAccessor(t, out)
	entries := acc.GetManagedFields()
	for i := range entries {
		if entries[i].Manager == manager {
			entries[i].Time = &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)}
		}
	}
	acc.SetManagedFields(entries)
	return out
}

func newPod() *corev1.Pod {
	p := makePod("cmp").label("a", "1").label("b", "2").claim("gpu").obj()
	p.Namespace, p.UID = "default", "p1"
	p.Spec.NodeSelector = map[string]string{"rack": "a", "zone": "z1"}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "busybox", Command: []string{"sleep", "1"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}})
	return p
}

// storedPod is a pod created by "creator" whose status "node" wrote.
func storedPod(t testing.TB, k *kind) *corev1.Pod {
	created := stored(t, k, "", newPod())
	status := created.DeepCopy()
	status.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", StartTime: &metav1.Time{Time: time.Unix(100, 0)},
		Conditions:        []corev1.PodCondition{{Type: "Initialized", Status: "True"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "busybox", Ready: true}, {Name: "d", Image: "busybox"}}}
	return storedBy(t, k, "status", created, status, "node")
}

// storedClaim is a v1 claim created by "creator", allocated and
// reserved by "scheduler", with a device status by "driver".
func storedClaim(t testing.TB, k *kind) *resourcev1.ResourceClaim {
	c := v1Claim("cmp")
	c.Namespace, c.UID = "default", "c1"
	created := stored(t, k, "", c)
	alloc := created.DeepCopy()
	alloc.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}}}
	alloc.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p1"}}
	allocated := storedBy(t, k, "status", created, alloc, "scheduler")
	dev := allocated.DeepCopy()
	dev.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0",
		Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Up", LastTransitionTime: metav1.Unix(100, 0)}}}}
	return storedBy(t, k, "status", allocated, dev, "driver")
}

// listMapKind serves a custom resource kind plural (kind Thing...) of
// TestApplyCustomResourceListMap's schema: a keyed list, an atomic map.
func listMapKind(t *testing.T, plural string) *kind {
	t.Helper()
	single := strings.TrimSuffix(plural, "s")
	kindName := strings.ToUpper(single[:1]) + single[1:]
	crd := strings.Replace(strings.Replace(listMapCRD, "widgets.apply", plural+".apply", 1),
		"{kind: Widget, plural: widgets, singular: widget}", fmt.Sprintf("{kind: %s, plural: %s, singular: %s}", kindName, plural, single), 1)
	r := admin(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, "Content-Type", "application/yaml")
	if r.code != 201 && r.code != 409 {
		t.Fatalf("create CRD: %s", r)
	}
	k := testAPI.reg.get(schema.GroupVersionResource{Group: "apply.example.com", Version: "v1", Resource: plural})
	if k == nil {
		t.Fatalf("kind %s not served", plural)
	}
	return k
}
