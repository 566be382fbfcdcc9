package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// TestV1SharesDerivedMatchRecount adds and removes shares of shareable
// devices at random, through states derived step by step, and compares
// each with a state counted afresh from the claims held: shares, their
// sums, and the shared counters, which the first share of a device
// consumes and the last gives back.
func TestV1SharesDerivedMatchRecount(t *testing.T) {
	var devs []resourcev1.Device
	for i := range 3 {
		d := v1tDev(fmt.Sprintf("nic-%d", i), v1tConsumes("card", "memory=4Gi"))
		d.AllowMultipleAllocations = ptr(true)
		d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			"bandwidth": {Value: resource.MustParse("100G")}, "queues": {Value: resource.MustParse("8")}}
		devs = append(devs, d)
	}
	slices_ := v1tSliceCount(2, v1tCounterSlice("counters", v1tNIC, "node-a", "node-a", "card", "memory=16Gi"),
		v1tSlice("nics", v1tNIC, "node-a", "node-a", devs...))
	inv := NewInventory(slices_, nil)
	r := rand.New(rand.NewPCG(1, 2))
	var held []*resourcev1.ResourceClaim
	st := NewState(inv, nil, nil)
	for step := range 400 {
		if len(held) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(held))
			st = st.WithoutAllocated(held[i])
			held = append(held[:i], held[i+1:]...)
		} else {
			dev := devs[r.IntN(len(devs))].Name
			c := v1tAllocated(fmt.Sprintf("c%d", step), "node-a", v1tNIC+"/node-a/"+dev)
			c.UID = k8stypes.UID(fmt.Sprintf("uid-%d", step))
			res := &c.Status.Allocation.Devices.Results[0]
			res.ShareID = ptr(v1ShareID(c, "r", dev))
			res.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{
				"bandwidth": resource.MustParse(fmt.Sprintf("%dG", 1+r.IntN(20))), "queues": resource.MustParse(fmt.Sprint(r.IntN(3)))}
			st = st.WithAllocated(c)
			held = append(held, c)
		}
		fresh := NewState(inv, held, nil)
		for _, d := range devs {
			n1, u1 := st.Shares(v1tNIC, "node-a", d.Name)
			n2, u2 := fresh.Shares(v1tNIC, "node-a", d.Name)
			if n1 != n2 || len(u1) != len(u2) {
				t.Fatalf("step %d: %s: derived %d shares %v, recount %d %v", step, d.Name, n1, u1, n2, u2)
			}
			for k, v := range u1 {
				if w := u2[k]; v.Cmp(w) != 0 {
					t.Fatalf("step %d: %s %s: derived %s, recount %s", step, d.Name, k, v.String(), w.String())
				}
			}
		}
		shared := 0
		for _, d := range devs {
			if n, _ := fresh.Shares(v1tNIC, "node-a", d.Name); n > 0 {
				shared++
			}
		}
		if got, want := st.CounterLeft(0), fresh.CounterLeft(0); got != want {
			t.Fatalf("step %d: counter left derived %d, recount %d", step, got, want)
		}
		if got, want := fresh.CounterLeft(0), inv.Counters()[0].Total-int64(shared)*inv.Uses(0)[0].Amount; got != want {
			t.Fatalf("step %d: %d shared devices leave %d of the counter, want %d", step, shared, got, want)
		}
	}
}

// TestRederiveShareIDs: an allocation computed for one claim, copied to
// another of the same shape, gets that claim's share IDs, the ones
// AllocateV1 gives it; results without a share keep none.
func TestRederiveShareIDs(t *testing.T) {
	d := v1tDev("nic-0")
	d.AllowMultipleAllocations = ptr(true)
	d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: resource.MustParse("100G")}}
	st := NewState(NewInventory([]*resourcev1.ResourceSlice{
		v1tSlice("nics", v1tNIC, "node-a", "node-a", d),
		v1tSlice("gpus", v1tGPU, "node-a-gpus", "node-a", v1tDev("gpu-0")),
	}, nil), nil, nil)
	share := func(name string) resourcev1.DeviceRequest {
		r := v1tExact(name, "nic", 1)
		r.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}}
		return r
	}
	claim := func(name string) *resourcev1.ResourceClaim {
		return v1tClaim(name, share("a"), share("b"), v1tExact("g", "gpu", 1))
	}
	alloc := func(c *resourcev1.ResourceClaim) *resourcev1.AllocationResult {
		res, err := AllocateV1(t.Context(), PrepareV1(nil, v1tClaims(c), v1tClassFunc(v1tClasses())), st, v1tNode("node-a"))
		if err != nil || !res.Fits {
			t.Fatalf("%v %v", err, res.Reasons)
		}
		return res.Allocations[0]
	}
	one, two := claim("one"), claim("two")
	copied := alloc(one).DeepCopy()
	RederiveShareIDs(two, copied)
	want := alloc(two)
	for i, r := range copied.Devices.Results {
		w := want.Devices.Results[i]
		if (r.ShareID == nil) != (w.ShareID == nil) || (r.ShareID != nil && *r.ShareID != *w.ShareID) {
			t.Errorf("result %d: share %v, want %v", i, r.ShareID, w.ShareID)
		}
	}
	if a := alloc(one); *a.Devices.Results[0].ShareID == *copied.Devices.Results[0].ShareID || *a.Devices.Results[0].ShareID == *a.Devices.Results[1].ShareID {
		t.Errorf("share IDs not distinct: %v", a.Devices.Results)
	}
}
