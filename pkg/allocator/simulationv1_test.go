package allocator

import (
	"context"
	"errors"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wholeGPUs is a seed slice of n unpartitioned GPUs of driver "gpu".
func wholeGPUs(node string, n int) *resourceapi.NodeResourceSlice {
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		p.ResourceInstances = append(p.ResourceInstances, resourceapi.ResourceInstance{
			Name: "gpu-" + string(rune('0'+i)), Attributes: []resourceapi.Attribute{quantityAttr("memory", "16Gi")}})
	}
	return makeSlice(node, "gpu", p)
}

// v1Fixture: node n1 with two seed GPUs; a seed claim "seed" for one; a
// DeviceClass "seed" of the seed driver and a v1 template "one" asking
// for one device of it.
func v1Fixture() *Snapshot {
	f := &simFixture{snap: &Snapshot{Classes: []*resourceapi.ResourceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "cls"}, DriverName: "gpu"}}}}
	f.snap.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	f.snap.Slices = []*resourceapi.NodeResourceSlice{wholeGPUs("n1", 2)}
	f.claim("seed", `quantities["memory"] >= "8Gi"`)
	f.snap.DeviceClasses = v1tClasses()
	f.snap.V1ClaimTemplates = []*resourcev1.ResourceClaimTemplate{{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{v1tExact("gpu", "seed", 1)}}}}}}
	return f.snap
}

func podFromTemplate(name, tmpl string) *corev1.Pod {
	p := podUsing(name)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr(tmpl)}}
	return p
}

// The Simulation allocates v1 claims over the same devices as seed
// claims: a seed pod and a v1 pod share node n1's two GPUs, a third pod
// fits only after one is evicted, and NodesNeeded counts template nodes
// for v1 pods, their devices published as v1 ResourceSlices.
func TestSimulationV1(t *testing.T) {
	ctx := context.Background()
	s := NewSimulation(v1Fixture(), Options{})
	if _, err := s.BindPod(ctx, podUsing("s1", "seed"), "n1"); err != nil {
		t.Fatal(err)
	}
	p1 := s.GenerateClaims(podFromTemplate("p1", "one"))
	if _, ok := s.V1Claim("default", "p1-gpu"); !ok {
		t.Fatalf("no v1 claim generated: %v", s.V1Claims())
	}
	if _, err := s.BindPod(ctx, p1, "n1"); err != nil {
		t.Fatal(err)
	}
	c, _ := s.V1Claim("default", "p1-gpu")
	if a := c.Status.Allocation; a == nil || a.Devices.Results[0].Device != "gpu-1" || !v1ReservedFor(c, p1) {
		t.Fatalf("p1's claim: %+v", c.Status)
	}
	p2 := s.GenerateClaims(podFromTemplate("p2", "one"))
	_, err := s.BindPod(ctx, p2, "n1")
	var re *ReasonError
	if !errors.Is(err, ErrDoesNotFit) || !errors.As(err, &re) {
		t.Fatalf("p2 on a full node: %v", err)
	}
	if err := s.RemoveNode("n1"); !errors.Is(err, ErrNodeInUse) {
		t.Fatalf("remove n1: %v", err)
	}
	clone := s.Clone()
	if err := clone.EvictPod(p1, "n1"); err != nil {
		t.Fatal(err)
	}
	if res, err := clone.Filter(ctx, p2, "n1"); err != nil || !res.Fits {
		t.Fatalf("p2 after evicting p1: %v %+v", err, res)
	}
	if res, _ := s.Filter(ctx, p2, "n1"); res.Fits {
		t.Fatal("the eviction in the clone changed the original")
	}
	// The seed side sees the v1 claim: a seed pod does not fit either.
	sim := NewSimulation(v1Fixture(), Options{})
	if _, err := sim.BindPod(ctx, sim.GenerateClaims(podFromTemplate("p1", "one")), "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.BindPod(ctx, sim.GenerateClaims(podFromTemplate("p2", "one")), "n1"); err != nil {
		t.Fatal(err)
	}
	if res, _ := sim.Filter(ctx, podUsing("s1", "seed"), "n1"); res.Fits {
		t.Fatal("seed pod fits where v1 claims hold every GPU")
	}

	tmpl := NodeTemplate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl"}},
		V1Slices: []*resourcev1.ResourceSlice{v1tSlice("tmpl-gpus", "gpu.example.com", "tmpl", "tmpl", v1tGPUs(2, "a100")...)}}
	var pending []*corev1.Pod
	for _, n := range []string{"q1", "q2", "q3"} {
		p := podUsing(n)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("two")}}
		pending = append(pending, p)
	}
	snap := v1Fixture()
	snap.V1ClaimTemplates = append(snap.V1ClaimTemplates, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{v1tExact("gpu", "gpu", 1)}}}}})
	nn, err := NewSimulation(snap, Options{}).NodesNeeded(ctx, tmpl, pending, 10)
	if err != nil {
		t.Fatal(err)
	}
	if nn.Nodes != 2 || len(nn.Placements) != 3 || len(nn.Unplaceable) != 0 {
		t.Fatalf("nodes needed: %+v", nn)
	}
}

// A DeviceTaintRule in the snapshot keeps a v1 claim that does not
// tolerate it off the tainted device, and a seed claim too.
func TestSimulationTaintRules(t *testing.T) {
	ctx := context.Background()
	snap := v1Fixture()
	snap.TaintRules = []*resourcev1.DeviceTaintRule{taintRule("drain", "gpu", "n1", "", resourcev1.DeviceTaintEffectNoSchedule)}
	s := NewSimulation(snap, Options{})
	res, err := s.Filter(ctx, s.GenerateClaims(podFromTemplate("p1", "one")), "n1")
	if err != nil || res.Fits || res.Reasons[0].Code != ReasonTainted {
		t.Fatalf("v1 pod on tainted GPUs: %v %+v", err, res)
	}
	res, err = s.Filter(ctx, podUsing("s1", "seed"), "n1")
	if err != nil || res.Fits || res.Reasons[0].Code != ReasonTainted {
		t.Fatalf("seed pod on tainted GPUs: %v %+v", err, res)
	}
}

// The v1 state a Simulation derives claim change by claim change equals
// a recount of its claims, and Filter on v1 pods may run concurrently.
func TestSimulationV1StateFollowsChanges(t *testing.T) {
	ctx := context.Background()
	snap := v1Fixture()
	snap.Slices = []*resourceapi.NodeResourceSlice{wholeGPUs("n1", 4)}
	s := NewSimulation(snap, Options{})
	s.v1State() // built, so the changes below are derived
	check := func(step string) {
		t.Helper()
		fresh := *snap
		fresh.Claims, fresh.V1Claims = s.Claims(), s.V1Claims()
		inv, got := s.v1State()
		_, want := NewSimulation(&fresh, Options{}).v1State()
		for _, p := range inv.Pools() {
			for _, d := range p.Devices {
				if g, w := got.InUse(p.Driver, p.Name, d.Name), want.InUse(p.Driver, p.Name, d.Name); g != w {
					t.Errorf("%s: device %s/%s in use %v, recounted %v", step, p.Name, d.Name, g, w)
				}
			}
		}
	}
	var pods []*corev1.Pod
	for _, n := range []string{"p1", "p2", "p3"} {
		p := s.GenerateClaims(podFromTemplate(n, "one"))
		if _, err := s.BindPod(ctx, p, "n1"); err != nil {
			t.Fatal(err)
		}
		check("bind " + n)
		pods = append(pods, p)
	}
	if err := s.EvictPod(pods[1], "n1"); err != nil {
		t.Fatal(err)
	}
	check("evict p2")
	if _, err := s.BindPod(ctx, podUsing("s1", "seed"), "n1"); err != nil {
		t.Fatal(err)
	}
	check("bind s1")
	if err := s.EvictPod(podUsing("s1", "seed"), "n1"); err != nil {
		t.Fatal(err)
	}
	check("evict s1")
	if _, err := s.BindPod(ctx, podUsing("s1", "seed"), "n1"); err != nil {
		t.Fatal(err)
	}
	q := s.GenerateClaims(podFromTemplate("q", "one"))
	s.nodesChanged() // nothing built: the Filters below build it at once
	done := make(chan *Result, 4)
	for range 4 {
		go func() {
			res, err := s.Filter(ctx, q, "n1")
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
	}
	for range 4 {
		if res := <-done; res == nil || !res.Fits {
			t.Errorf("q does not fit the last GPU: %+v", res)
		}
	}
}
