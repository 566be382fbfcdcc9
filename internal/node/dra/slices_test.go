package dra

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/dra/dratest"
)

// model is a partitionable model with the named instances, as JSON.
func model(instances ...string) []byte {
	var parts []string
	for _, n := range instances {
		parts = append(parts, fmt.Sprintf(`{"name":%q}`, n))
	}
	return []byte(`{"partitionable":{"resourceInstances":[` + strings.Join(parts, ",") + `]}}`)
}

// nodeSlices lists the slices whose spec.nodeName is e's node, by name.
func (e *env) nodeSlices() map[string]*resourcev1alpha2.NodeResourceSlice {
	e.t.Helper()
	l, err := e.admin.NodeResourceSlices().List(callCtx(e.t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.node})
	if err != nil {
		e.t.Fatalf("list slices: %v", err)
	}
	out := map[string]*resourcev1alpha2.NodeResourceSlice{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// waitSlice waits until the driver's canonical slice satisfies cond.
func (e *env) waitSlice(driver, what string, cond func(*resourcev1alpha2.NodeResourceSlice) bool) *resourcev1alpha2.NodeResourceSlice {
	e.t.Helper()
	var s *resourcev1alpha2.NodeResourceSlice
	eventually(e.t, what, func() (bool, string) {
		s = e.nodeSlices()[sliceName(e.node, driver)]
		return s != nil && cond(s), fmt.Sprintf("%+v", s)
	})
	return s
}

func instanceNames(s *resourcev1alpha2.NodeResourceSlice) string {
	if s.Spec.Partitionable == nil {
		return ""
	}
	var names []string
	for _, i := range s.Spec.Partitionable.ResourceInstances {
		names = append(names, i.Name)
	}
	return strings.Join(names, ",")
}

func hasInstances(names string) func(*resourcev1alpha2.NodeResourceSlice) bool {
	return func(s *resourcev1alpha2.NodeResourceSlice) bool { return instanceNames(s) == names }
}

func TestSliceLifecycle(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	node, err := e.admin.Nodes().Get(callCtx(t), e.node)
	if err != nil {
		t.Fatal(err)
	}
	p := e.plugin(m, gpuDriver, func(o *dratest.Options) { o.Model = model("gpu-0") })
	created := e.waitSlice(gpuDriver, "slice created", hasInstances("gpu-0"))
	if created.Spec.NodeName != e.node || created.Spec.DriverName != gpuDriver {
		t.Fatalf("slice spec %+v", created.Spec)
	}
	refs := created.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != node.UID || refs[0].Name != e.node ||
		refs[0].BlockOwnerDeletion == nil || *refs[0].BlockOwnerDeletion {
		t.Fatalf("owner references %+v, want the Node %s without blockOwnerDeletion", refs, node.UID)
	}

	p.SetModel(model("gpu-0", "gpu-1"))
	updated := e.waitSlice(gpuDriver, "slice updated", hasInstances("gpu-0,gpu-1"))
	if updated.UID != created.UID {
		t.Fatalf("slice re-created (uid %s -> %s), want an update in place", created.UID, updated.UID)
	}

	// The same model again: no write.
	m.slices.mu.Lock()
	seq := m.slices.seq
	m.slices.mu.Unlock()
	p.SetModel(model("gpu-0", "gpu-1"))
	eventually(t, "resent model synced", func() (bool, string) { return m.slices.syncedSeq(gpuDriver) > seq, "" })
	if s := e.nodeSlices()[created.Name]; s.ResourceVersion != updated.ResourceVersion {
		t.Fatalf("unchanged model rewrote the slice (resourceVersion %s -> %s)", updated.ResourceVersion, s.ResourceVersion)
	}
	for op, want := range map[string]float64{"create": 1, "update": 1, "delete": 0} {
		if n := metric(t, m, "dra_resource_slice_writes_total", "operation", op); n != want {
			t.Errorf("slice writes %s = %v, want %v", op, n, want)
		}
	}

	// Invalid models: an event, and the slice keeps the last valid one.
	for _, bad := range []struct{ model, mentions string }{
		{`{"partitionable":{"resourceInstances":[{"name":"Not_A_Name"}]}}`, "Not_A_Name"},
		{`{"partitionable":{},"surprise":1}`, `unknown field "surprise"`},
	} {
		p.SetModel([]byte(bad.model))
		eventually(t, "invalid model event", func() (bool, string) {
			evs := strings.Join(e.events.all(), "\n")
			return strings.Contains(evs, "Node/"+e.node+" Warning "+ReasonInvalidResourceModel) && strings.Contains(evs, bad.mentions), evs
		})
	}
	if s := e.nodeSlices()[created.Name]; s == nil || s.ResourceVersion != updated.ResourceVersion {
		t.Fatalf("an invalid model changed the slice: %+v", s)
	}

	// Deleted or changed by someone else: written again.
	if err := e.admin.NodeResourceSlices().Delete(callCtx(t), created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete slice: %v", err)
	}
	recreated := e.waitSlice(gpuDriver, "slice re-created", func(s *resourcev1alpha2.NodeResourceSlice) bool {
		return s.UID != created.UID && instanceNames(s) == "gpu-0,gpu-1"
	})
	edited := recreated.DeepCopy()
	edited.Spec.Partitionable.ResourceInstances = nil
	if _, err := e.admin.NodeResourceSlices().Update(callCtx(t), edited); err != nil {
		t.Fatalf("edit slice: %v", err)
	}
	e.waitSlice(gpuDriver, "slice restored", func(s *resourcev1alpha2.NodeResourceSlice) bool {
		return s.UID == recreated.UID && s.ResourceVersion != recreated.ResourceVersion && instanceNames(s) == "gpu-0,gpu-1"
	})

	// Gone for longer than the grace period: deleted.
	p.Unregister()
	eventually(t, "slice deleted after the grace period", func() (bool, string) {
		_, err := e.admin.NodeResourceSlices().Get(callCtx(t), created.Name)
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestSliceKeptWhenDriverReturnsWithinGrace(t *testing.T) {
	e := newEnv(t)
	m := e.start(func(o *Options) { o.SliceGracePeriod = 2 * time.Second })
	p := e.plugin(m, gpuDriver, func(o *dratest.Options) { o.Model = model("gpu-0") })
	before := e.waitSlice(gpuDriver, "slice created", hasInstances("gpu-0"))
	p.Unregister()
	eventually(t, "driver unregistered", func() (bool, string) { return m.drivers.get(gpuDriver) == nil, "" })
	p.Register()
	if st := p.Status(t); !st.PluginRegistered {
		t.Fatalf("registration refused: %s", st.Error)
	}
	time.Sleep(3 * time.Second) // past the grace period of the first departure
	after := e.waitSlice(gpuDriver, "slice still there", hasInstances("gpu-0"))
	if after.UID != before.UID {
		t.Fatalf("slice re-created (uid %s -> %s), want it reused", before.UID, after.UID)
	}
}

func TestStaleAndDuplicateSlicesDeletedAtStart(t *testing.T) {
	e := newEnv(t)
	other := takeNode(t)
	create := func(name, node, driver string) *resourcev1alpha2.NodeResourceSlice {
		s, err := e.admin.NodeResourceSlices().Create(callCtx(t), &resourcev1alpha2.NodeResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1alpha2.NodeResourceSliceSpec{NodeName: node, DriverName: driver,
				NodeResourceModel: resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{}}},
		})
		if err != nil {
			t.Fatalf("create slice %s: %v", name, err)
		}
		return s
	}
	canonical := create(sliceName(e.node, gpuDriver), e.node, gpuDriver)
	create(e.node+"-gpu-duplicate", e.node, gpuDriver)
	create(e.node+"-old", e.node, "old.example.com")
	foreign := create(other+"-old", other, "old.example.com")

	m := e.start(func(o *Options) { o.SliceGracePeriod = 4 * time.Second }) // ample for the registration below
	e.plugin(m, gpuDriver, func(o *dratest.Options) { o.Model = model("gpu-0") })
	s := e.waitSlice(gpuDriver, "slice updated", hasInstances("gpu-0"))
	if s.UID != canonical.UID {
		t.Fatalf("slice %s re-created, want the existing one updated", s.Name)
	}
	eventually(t, "stale and duplicate slices deleted", func() (bool, string) {
		got := e.nodeSlices()
		return len(got) == 1 && got[canonical.Name] != nil, fmt.Sprint(len(got), " slices")
	})
	if _, err := e.admin.NodeResourceSlices().Get(callCtx(t), foreign.Name); err != nil {
		t.Fatalf("another node's slice: %v", err)
	}
}

func TestSliceName(t *testing.T) {
	long := strings.Repeat("n", 200)
	for _, tc := range []struct{ node, driver string }{
		{"node-1", "gpu.example.com"},
		{long, strings.Repeat("d", 200) + ".example.com"},
		{"a-b", "c"}, {"a", "b-c"},
	} {
		name := sliceName(tc.node, tc.driver)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("sliceName(%q, %q) = %q: %v", tc.node, tc.driver, name, errs)
		}
	}
	if sliceName("a-b", "c") == sliceName("a", "b-c") {
		t.Error("two (node, driver) pairs share a slice name")
	}
}
