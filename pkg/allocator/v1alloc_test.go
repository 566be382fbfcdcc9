package allocator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestAllocateV1AdminAccessDoesNotUse: a device taken with adminAccess
// stays free in the state and for the pod's other claims.
func TestAllocateV1AdminAccessDoesNotUse(t *testing.T) {
	inv := NewV1Inventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", v1tGPUs(1, "a100")...)}, nil)
	st := NewV1State(inv, nil, nil)
	admin := v1tClaim("admin", v1tAdmin(v1tExact("gpu", "gpu", 1)))
	user := v1tClaim("user", v1tExact("gpu", "gpu", 1))
	node := v1tNode("node-a")
	res := v1tAllocate(t, st, node, nil, V1Claim{Claim: admin, AdminNamespace: true}, V1Claim{Claim: user})
	if !res.Fits {
		t.Fatalf("admin and user claims in one pod: %v", res.Reasons)
	}
	a := res.Allocations[0].Devices.Results[0]
	if a.AdminAccess == nil || !*a.AdminAccess || a.Device != "gpu-0" || res.Allocations[1].Devices.Results[0].AdminAccess != nil {
		t.Errorf("results %+v, %+v", res.Allocations[0].Devices.Results, res.Allocations[1].Devices.Results)
	}
	st2 := st.WithAllocated(v1tWithResults(res, admin, user)[0])
	if st2.InUse(v1tGPU, "node-a", "gpu-0") {
		t.Error("an admin-access result made the device used")
	}
	if res := v1tAllocate(t, st2, node, nil, V1Claim{Claim: user}); !res.Fits {
		t.Errorf("the device of an admin-access claim cannot be allocated: %v", res.Reasons)
	}
	st3 := st2.WithAllocated(v1tWithResults(res, admin, user)[1])
	if !st3.InUse(v1tGPU, "node-a", "gpu-0") {
		t.Error("the user claim's device is not in use")
	}
	if res := v1tAllocate(t, st3, node, nil, V1Claim{Claim: v1tClaim("late", v1tExact("gpu", "gpu", 1))}); res.Fits {
		t.Error("a device in use was allocated again")
	}
	if !st3.WithoutAllocated(v1tWithResults(res, admin, user)[1]).InUse(v1tGPU, "node-a", "gpu-0") == st.InUse(v1tGPU, "node-a", "gpu-0") {
		t.Error("WithoutAllocated did not restore the state")
	}
}

// TestAllocateV1SeedStateSeesV1Claims: what a v1 claim holds of a
// projected seed pool is in use for the seed allocator too, through
// V1Inventory.SeedAllocations, and for v1 through NewV1State.
func TestAllocateV1SeedStateSeesV1Claims(t *testing.T) {
	seed := []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 1)}
	inv := NewV1Inventory(nil, seed)
	st := NewV1State(inv, nil, nil)
	node := v1tNode("node-a")
	claim := v1tClaim("q", v1tExact("quarter", "seed", 1, `device.capacity["gpu"].memory.compareTo(quantity("8Gi")) == 0`))
	res := v1tAllocate(t, st, node, nil, V1Claim{Claim: claim})
	if !res.Fits || res.Allocations[0].Devices.Results[0].Device != "gpu-0--quarter--quarter-0" {
		t.Fatalf("v1 quarter: fits %v %v %v", res.Fits, v1tDevices(res), res.Reasons)
	}
	v1claims := v1tWithResults(res, claim)
	if !NewV1State(inv, v1claims, nil).InUse("gpu", "node-a", "gpu-0--quarter--quarter-0") {
		t.Error("NewV1State: the v1 claim's seed device is not in use")
	}

	model := NewModel("node-a", seed)
	whole := makeClaim("w", "gpu", selWhole)
	for _, tc := range []struct {
		name  string
		state *NodeState
		fits  bool
	}{
		{"without the v1 claim", NewNodeState(model, nil, nil), true},
		{"with the v1 claim", NewNodeState(model, nil, inv.SeedAllocations(v1claims...)), false},
		{"derived", NewNodeState(model, nil, nil).WithAllocated(inv.SeedAllocations(v1claims...)...), false},
	} {
		res, err := Allocate(context.Background(), Prepare(nil, []Claim{whole}), tc.state)
		if err != nil || res.Fits != tc.fits {
			t.Errorf("%s: seed claim for a whole GPU: fits %v, want %v (%v, %v)", tc.name, res.Fits, tc.fits, err, res.Reasons)
		}
	}
	quarter := makeClaim("q", "gpu", `quantities["memory"] == quantity("8Gi")`)
	res2, err := Allocate(context.Background(), Prepare(nil, []Claim{quarter}), NewNodeState(model, nil, inv.SeedAllocations(v1claims...)))
	if err != nil || !res2.Fits || res2.Allocations[0].ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID == "gpu-0/quarter/quarter-0" {
		t.Errorf("seed quarter next to the v1 one: %v %v", err, res2)
	}
}

// TestAllocateV1BestFit: first fit (the first device in name order) takes
// the whole partitioned GPU and leaves no room for a later claim for two
// halves; best fit takes the small device and leaves room.
func TestAllocateV1BestFit(t *testing.T) {
	slices_ := []*resourcev1.ResourceSlice{
		v1tCounterSlice("a-counters", v1tGPU, "node-a-part", "node-a", "gpu-0-mem", "memory=40Gi"),
		v1tSlice("a-parts", v1tGPU, "node-a-part", "node-a",
			v1tDev("full", v1tCap("memory", "40Gi"), v1tConsumes("gpu-0-mem", "memory=40Gi")),
			v1tDev("half-0", v1tCap("memory", "20Gi"), v1tConsumes("gpu-0-mem", "memory=20Gi")),
			v1tDev("half-1", v1tCap("memory", "20Gi"), v1tConsumes("gpu-0-mem", "memory=20Gi"))),
		v1tSlice("b-small", v1tGPU, "node-a-small", "node-a", v1tDev("small", v1tCap("memory", "10Gi"))),
	}
	v1tSliceCount(2, slices_[0], slices_[1])
	inv := NewV1Inventory(slices_, nil)
	st := NewV1State(inv, nil, nil)
	node := v1tNode("node-a")
	first := v1tClaim("first", v1tExact("gpu", "gpu", 1))
	later := v1tClaim("later", v1tExact("gpu", "gpu", 2, `device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0`))

	res := v1tAllocate(t, st, node, nil, V1Claim{Claim: first})
	if got := v1tDevices(res); !reflect.DeepEqual(got, [][]string{{"gpu=node-a-small/small"}}) {
		t.Fatalf("best fit took %v", got)
	}
	if res.Score != 75 {
		t.Errorf("score %d, want 75 (3 of 4 free devices stay free)", res.Score)
	}
	after := st.WithAllocated(v1tWithResults(res, first)...)
	if res := v1tAllocate(t, after, node, nil, V1Claim{Claim: later}); !res.Fits {
		t.Errorf("after best fit, the later claim does not fit: %v", res.Reasons)
	}
	firstFit := first.DeepCopy()
	firstFit.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: v1tGPU, Pool: "node-a-part", Device: "full"}}}}
	if res := v1tAllocate(t, st.WithAllocated(firstFit), node, nil, V1Claim{Claim: later}); res.Fits {
		t.Error("after first fit, the later claim fits: the test shows nothing")
	}
}

// TestAllocateV1Deadline: a context that ends before or during the search
// gives ErrDeadline, never "does not fit".
func TestAllocateV1Deadline(t *testing.T) {
	var devs []resourcev1.Device
	for i := range 96 {
		devs = append(devs, v1tDev(fmt.Sprintf("gpu-%02d", i), v1tInt("n", int64(i))))
	}
	inv := NewV1Inventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", devs...)}, nil)
	st := NewV1State(inv, nil, nil)
	var claims []V1Claim
	for i := range 3 {
		claims = append(claims, V1Claim{Claim: v1tClaim(fmt.Sprintf("c%d", i), v1tExact("gpu", "gpu", 30))})
	}
	req := PrepareV1(nil, claims, v1tClassFunc(v1tClasses()))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, ctx := range map[string]context.Context{
		"canceled before":     canceled,
		"canceled in between": &v1tLateCancel{Context: context.Background(), after: 1},
	} {
		res, err := AllocateV1(ctx, req, st, v1tNode("node-a"))
		if !errors.Is(err, ErrDeadline) || !errors.Is(err, context.Canceled) || res != nil {
			t.Errorf("%s: %v, %v", name, res, err)
		}
	}
	if res, err := AllocateV1(context.Background(), req, st, v1tNode("node-a")); err != nil || !res.Fits {
		t.Errorf("without a deadline: %v, %v", res, err)
	}
}

// v1tLateCancel is a context that ends after Err was asked after times.
type v1tLateCancel struct {
	context.Context
	after int
}

func (c *v1tLateCancel) Err() error {
	if c.after > 0 {
		c.after--
		return nil
	}
	return context.Canceled
}

// TestAllocateV1Deterministic: equal inputs give equal outputs, whatever
// the order of the slices, claims in the state and map iteration.
func TestAllocateV1Deterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 20 {
		slices_, claims, classes := v1tRandomCase(rng, 6, false)
		var first []byte
		for range 3 {
			shuffled := slices.Clone(slices_)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			inv := NewV1Inventory(shuffled, nil)
			res := v1tAllocate(t, NewV1State(inv, nil, nil), v1tNode("node-a"), classes, claims...)
			got := []byte(fmt.Sprintf("%v %v %d %v", res.Fits, v1tDevices(res), res.Score, res.Reasons))
			for _, a := range res.Allocations {
				got = fmt.Appendf(got, " %+v", a)
			}
			if first == nil {
				first = got
			} else if string(got) != string(first) {
				t.Fatalf("round %d: results differ:\n%s\n%s", round, first, got)
			}
		}
	}
}

// TestAllocateV1Results: the fields of an allocation result besides the
// devices: config from class and claim, tolerations, node selectors.
func TestAllocateV1Results(t *testing.T) {
	opaque := func(driver, params string) resourcev1.DeviceConfiguration {
		return resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver,
			Parameters: runtime.RawExtension{Raw: []byte(params)}}}
	}
	gpuClass := v1tClass("gpu", `device.driver == "gpu.example.com"`)
	gpuClass.Spec.Config = []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: opaque(v1tGPU, `{"class":1}`)}}
	classes := []*resourcev1.DeviceClass{gpuClass, v1tClass("nic", `device.driver == "nic.example.com"`)}

	sel := v1tSlice("net", v1tNIC, "fabric", "", v1tDev("nic-0"))
	sel.Spec.AllNodes = nil
	sel.Spec.NodeSelector = &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchExpressions: []k8scorev1.NodeSelectorRequirement{
		{Key: "rack", Operator: "In", Values: []string{"r1"}}}}}}
	inv := NewV1Inventory([]*resourcev1.ResourceSlice{
		v1tSlice("g", v1tGPU, "node-a", "node-a", v1tGPUs(2, "a100")...), sel,
		v1tSlice("all", v1tNIC, "everywhere", "", v1tDev("nic-9")),
	}, nil)
	st := NewV1State(inv, nil, nil)
	node := v1tNode("node-a", "rack=r1")

	claim := v1tClaim("c", v1tTolerate(v1tExact("a", "gpu", 1), resourcev1.DeviceToleration{Key: "k", Operator: resourcev1.DeviceTolerationOpExists}),
		v1tFirst("b", v1tSub("x", "gpu", 5), v1tSub("y", "gpu", 1)), v1tExact("c", "nic", 1))
	claim.Spec.Devices.Config = []resourcev1.DeviceClaimConfiguration{
		{Requests: []string{"a"}, DeviceConfiguration: opaque(v1tGPU, `{"a":1}`)},
		{Requests: []string{"b/x"}, DeviceConfiguration: opaque(v1tGPU, `{"bx":1}`)},
		{Requests: []string{"b/y", "a"}, DeviceConfiguration: opaque(v1tGPU, `{"all":1}`)},
		{DeviceConfiguration: opaque(v1tGPU, `{"none":1}`)},
	}
	res := v1tAllocate(t, st, node, classes, V1Claim{Claim: claim})
	if !res.Fits {
		t.Fatal(res.Reasons)
	}
	a := res.Allocations[0]
	if got := v1tDevices(res)[0]; !reflect.DeepEqual(got, []string{"a=node-a/gpu-0", "b/y=node-a/gpu-1", "c=everywhere/nic-9"}) {
		t.Errorf("devices %v", got)
	}
	if tol := a.Devices.Results[0].Tolerations; len(tol) != 1 || tol[0].Key != "k" || a.Devices.Results[1].Tolerations != nil || a.Devices.Results[0].AdminAccess != nil {
		t.Errorf("tolerations %+v", a.Devices.Results)
	}
	var cfg []string
	for _, c := range a.Devices.Config {
		cfg = append(cfg, fmt.Sprintf("%s%v%s", c.Source, c.Requests, c.Opaque.Parameters.Raw))
	}
	// The class config names the requests of its class; the claim's
	// config for b/x is left out (b/y was chosen); a list naming every
	// request would become empty, this one does not name c.
	want := []string{`FromClass[a b/y]{"class":1}`, `FromClaim[a]{"a":1}`, `FromClaim[b/y a]{"all":1}`, `FromClaim[]{"none":1}`}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config\n%q\nwant\n%q", cfg, want)
	}
	if ns := a.NodeSelector; ns == nil || ns.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-a" {
		t.Errorf("node selector %v", ns)
	}

	// Network-attached devices: their one-term selectors merge; allNodes
	// adds nothing.
	nics := v1tClaim("n", v1tExact("n", "nic", 2))
	res = v1tAllocate(t, st, node, classes, V1Claim{Claim: nics})
	if !res.Fits {
		t.Fatal(res.Reasons)
	}
	ns := res.Allocations[0].NodeSelector
	if ns == nil || len(ns.NodeSelectorTerms) != 1 || len(ns.NodeSelectorTerms[0].MatchExpressions) != 1 || ns.NodeSelectorTerms[0].MatchExpressions[0].Key != "rack" {
		t.Errorf("node selector %v", ns)
	}
	// One device on all nodes: no selector; the rack's device: its term.
	one := V1Claim{Claim: v1tClaim("o", v1tExact("n", "nic", 1))}
	res = v1tAllocate(t, st, node, classes, one)
	if !res.Fits || res.Allocations[0].NodeSelector != nil || res.Allocations[0].Devices.Results[0].Device != "nic-9" {
		t.Errorf("allNodes device: %v %+v", v1tDevices(res), res.Allocations[0])
	}
	res = v1tAllocate(t, NewV1State(inv, []*resourcev1.ResourceClaim{v1tAllocated("x", "", v1tNIC+"/everywhere/nic-9")}, nil), node, classes, one)
	if !res.Fits || !reflect.DeepEqual(res.Allocations[0].NodeSelector, sel.Spec.NodeSelector) {
		t.Errorf("rack device: %v %+v", v1tDevices(res), res.Allocations[0])
	}
	// A node outside the rack sees only the allNodes device.
	if res := v1tAllocate(t, st, v1tNode("node-b", "rack=r2"), classes, V1Claim{Claim: nics}); res.Fits {
		t.Errorf("two nics on node-b: %v", v1tDevices(res))
	}
}

// TestV1StateCopyOnWrite: derived states leave their parent as it was.
func TestV1StateCopyOnWrite(t *testing.T) {
	inv := NewV1Inventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", v1tGPUs(200, "a100")...)}, nil)
	base := NewV1State(inv, nil, nil)
	st := base
	var claims []*resourcev1.ResourceClaim
	for i := range 200 {
		c := v1tAllocated(fmt.Sprintf("c%d", i), "", fmt.Sprintf("%s/node-a/gpu-%d", v1tGPU, i))
		claims = append(claims, c)
		next := st.WithAllocated(c)
		if st.InUse(v1tGPU, "node-a", fmt.Sprintf("gpu-%d", i)) || !next.InUse(v1tGPU, "node-a", fmt.Sprintf("gpu-%d", i)) {
			t.Fatalf("claim %d: the parent changed or the child did not", i)
		}
		st = next
	}
	for i := range 200 {
		if base.InUse(v1tGPU, "node-a", fmt.Sprintf("gpu-%d", i)) || !st.InUse(v1tGPU, "node-a", fmt.Sprintf("gpu-%d", i)) {
			t.Fatalf("device %d", i)
		}
	}
	empty := st.WithoutAllocated(claims...)
	for i := range 200 {
		if empty.InUse(v1tGPU, "node-a", fmt.Sprintf("gpu-%d", i)) {
			t.Fatalf("device %d still in use", i)
		}
	}
}

// TestAllocateV1PartitionsDecidedQuickly: 8 identical GPUs as counter
// sets, 8 halves and 17 quarters asked for (16 fit): the symmetry between
// untouched sets and the per-set room in the forward check decide it in
// a few dozen steps (without them, the search gives up after millions).
func TestAllocateV1PartitionsDecidedQuickly(t *testing.T) {
	var parts []resourcev1.Device
	var slices_ []*resourcev1.ResourceSlice
	for g := range 8 {
		set := fmt.Sprintf("gpu-%d", g)
		slices_ = append(slices_, v1tCounterSlice("c"+set, v1tGPU, "mig", "node-a", set, "memory=40Gi"))
		parts = append(parts, v1tDev(set+"-whole", v1tCap("memory", "40Gi"), v1tConsumes(set, "memory=40Gi")))
		for h := range 2 {
			parts = append(parts, v1tDev(fmt.Sprintf("%s-half-%d", set, h), v1tCap("memory", "20Gi"), v1tConsumes(set, "memory=20Gi")))
		}
		for q := range 4 {
			parts = append(parts, v1tDev(fmt.Sprintf("%s-quarter-%d", set, q), v1tCap("memory", "10Gi"), v1tConsumes(set, "memory=10Gi")))
		}
	}
	slices_ = v1tSliceCount(9, append(slices_, v1tSlice("mig", v1tGPU, "mig", "node-a", parts...))...)
	st := NewV1State(NewV1Inventory(slices_, nil), nil, nil)
	node := v1tNode("node-a")
	for _, tc := range []struct {
		quarters int64
		fits     bool
	}{{16, true}, {17, false}} {
		claims := v1tClaims(v1tClaim("a", v1tExact("h", "gpu", 8, `device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) == 0`)),
			v1tClaim("b", v1tExact("q", "gpu", tc.quarters, `device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) == 0`)))
		req := PrepareV1(nil, claims, v1tClassFunc(v1tClasses()))
		p, rs := req.setup(st, node)
		if len(rs) > 0 {
			t.Fatal(rs)
		}
		s := p.newSearch(context.Background(), p.openFixed(), 0)
		if err := s.run(); err != nil || s.found != tc.fits || s.steps > 200 {
			t.Errorf("%d quarters: found %v after %d steps (%v)", tc.quarters, s.found, s.steps, err)
		}
		res := v1tAllocate(t, st, node, nil, claims...)
		if res.Fits != tc.fits {
			t.Errorf("%d quarters: fits %v", tc.quarters, res.Fits)
		}
		if tc.fits {
			// Best fit packs the halves into four GPUs, the quarters into
			// the other four.
			for _, r := range res.Allocations[0].Devices.Results {
				if n := r.Device[len("gpu-")]; n > '3' {
					t.Errorf("a half on %s", r.Device)
				}
			}
		} else if !slices.ContainsFunc(res.Reasons, func(r Reason) bool { return r.Code == ReasonCounters }) {
			t.Errorf("reasons %v", res.Reasons)
		}
	}
}

// TestAllocateV1Concurrent shares one inventory, state and request between
// goroutines, as a scheduler filtering nodes in parallel does, while
// others derive states; run with -race.
func TestAllocateV1Concurrent(t *testing.T) {
	st, nodes := v1tBenchCluster()
	req := PrepareV1(nil, v1tBenchClaims(), v1tClassFunc(v1tClasses()))
	want, err := AllocateV1(context.Background(), req, st, nodes[3])
	if err != nil || !want.Fits {
		t.Fatal(err, want.Reasons)
	}
	done := make(chan string)
	for g := range 4 {
		go func() {
			msg := ""
			for i := range 20 {
				node := nodes[(g+i)%len(nodes)]
				res, err := AllocateV1(context.Background(), req, st, node)
				if err != nil || !res.Fits {
					msg = fmt.Sprint(err, res)
				}
				if node == nodes[3] && !reflect.DeepEqual(res, want) {
					msg = "results differ"
				}
				st.WithAllocated(v1tAllocated(fmt.Sprint("x", g, i), "", v1tGPU+"/"+node.Name+"/gpu-1"))
			}
			done <- msg
		}()
	}
	for range 4 {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}

// TestAllocateV1NothingFitsIsFast: infeasible requests on 64 devices that
// pass every single-request bound are decided in few steps: identical
// devices are tried once per class, and requests that cannot share
// devices are bounded together.
func TestAllocateV1NothingFitsIsFast(t *testing.T) {
	var devs []resourcev1.Device
	for i := range 64 {
		devs = append(devs, v1tDev(fmt.Sprintf("gpu-%02d", i), v1tStr("uuid", fmt.Sprint("u", i)), v1tInt("numa", int64(i%8)), v1tInt("root", int64(i/8))))
	}
	st := NewV1State(NewV1Inventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", devs...)}, nil), nil, nil)
	for _, tc := range []struct {
		name   string
		claims []V1Claim
		steps  int
	}{
		{"9 distinct of 8 values", v1tClaims(v1tConstrain(v1tClaim("c", v1tExact("g", "gpu", 9)), v1tDistinct(v1tGPU+"/numa"))), 300},
		{"9 matching of 8 per value", v1tClaims(v1tConstrain(v1tClaim("c", v1tExact("g", "gpu", 9)), v1tMatch(v1tGPU+"/numa"))), 20},
		{"three claims for 65", v1tClaims(v1tClaim("a", v1tExact("a", "gpu", 32)), v1tClaim("b", v1tExact("b", "gpu", 32)), v1tClaim("c", v1tExact("c", "gpu", 1))), 70},
		{"three requests matching on 8", v1tClaims(v1tConstrain(v1tClaim("c", v1tExact("a", "gpu", 4), v1tExact("b", "gpu", 4), v1tExact("c", "gpu", 1)),
			v1tMatch(v1tGPU+"/root"))), 20},
	} {
		req := PrepareV1(nil, tc.claims, v1tClassFunc(v1tClasses()))
		p, rs := req.setup(st, v1tNode("node-a"))
		if len(rs) > 0 {
			t.Fatal(rs)
		}
		s := p.newSearch(context.Background(), p.openFixed(), 0)
		if err := s.run(); err != nil || s.found || s.steps > tc.steps {
			t.Errorf("%s: found %v after %d steps, want none within %d (%v)", tc.name, s.found, s.steps, tc.steps, err)
		}
		if res := v1tAllocate(t, st, v1tNode("node-a"), nil, tc.claims...); res.Fits || len(res.Reasons) == 0 {
			t.Errorf("%s: fits %v, reasons %v", tc.name, res.Fits, res.Reasons)
		}
	}
}

// TestAllocateV1SeedPartitionsDecidedQuickly: on 8 projected seed GPUs
// (whole, halves or quarters), 5 halves lock three GPUs to halves and
// leave room for 20 quarters: 20 fit, 21 are refused in few steps
// (identical untouched instances and sibling leaves are tried once).
func TestAllocateV1SeedPartitionsDecidedQuickly(t *testing.T) {
	st := NewV1State(NewV1Inventory(nil, []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 8)}), nil, nil)
	for _, tc := range []struct {
		quarters int64
		fits     bool
	}{{20, true}, {21, false}} {
		claims := v1tClaims(v1tClaim("c",
			v1tExact("h", "seed", 5, `device.capacity["gpu"].memory.compareTo(quantity("16Gi")) == 0`),
			v1tExact("q", "seed", tc.quarters, `device.capacity["gpu"].memory.compareTo(quantity("8Gi")) == 0`)))
		req := PrepareV1(nil, claims, v1tClassFunc(v1tClasses()))
		p, rs := req.setup(st, v1tNode("node-a"))
		if len(rs) > 0 {
			t.Fatal(rs)
		}
		s := p.newSearch(context.Background(), p.openFixed(), 0)
		if err := s.run(); err != nil || s.found != tc.fits || s.steps > 500 {
			t.Errorf("%d quarters: found %v after %d steps (%v)", tc.quarters, s.found, s.steps, err)
		}
		if res := v1tAllocate(t, st, v1tNode("node-a"), nil, claims...); res.Fits != tc.fits {
			t.Errorf("%d quarters: fits %v %v", tc.quarters, res.Fits, res.Reasons)
		}
	}
}

// TestV1InventoryDoublePublishing: a driver that publishes a node both
// through its NodeResourceSlice and through v1 ResourceSlices of that node
// (any pool name) has the v1 pool skipped, so no device counts twice; its
// v1 pools of other nodes and other drivers' pools of the node stay.
func TestV1InventoryDoublePublishing(t *testing.T) {
	seed := []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 1)}
	inv := NewV1Inventory([]*resourcev1.ResourceSlice{
		v1tSlice("twice", "gpu", "gpus-of-a", "node-a", v1tGPUs(1, "a100")...),
		v1tSlice("elsewhere", "gpu", "gpus-of-b", "node-b", v1tGPUs(1, "a100")...),
		v1tSlice("other", v1tGPU, "node-a", "node-a", v1tGPUs(1, "a100")...),
	}, seed)
	usable := map[string]bool{}
	for _, p := range inv.Pools() {
		usable[p.Driver+"/"+p.Name] = p.Usable()
	}
	want := map[string]bool{"gpu/gpus-of-a": false, "gpu/gpus-of-b": true, v1tGPU + "/node-a": true, "gpu/node-a": true}
	if !maps.Equal(usable, want) {
		t.Fatalf("usable pools %v, want %v", usable, want)
	}
	found := false
	for _, pr := range inv.Problems() {
		found = found || (pr.Pool == "gpus-of-a" && strings.Contains(pr.Reason, "through a NodeResourceSlice too"))
	}
	if !found {
		t.Fatalf("problems %+v do not say why gpus-of-a is skipped", inv.Problems())
	}
}
