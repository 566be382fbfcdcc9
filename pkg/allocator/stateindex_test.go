package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// TestStateCountsDevicesTheInventoryLacks: the one state counts devices
// by their inventory index, and an allocation of a device the inventory
// does not know (its slice is gone) on the side. Claims on known and
// unknown devices, whole or as shares, come and go at random through
// derived states; each state must agree with one counted afresh, and a
// new inventory that has the devices again counts them in use.
func TestStateCountsDevicesTheInventoryLacks(t *testing.T) {
	const known, all = 4, 6 // gpu-4 and gpu-5 have no slice in inv
	inv := NewInventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", v1tGPUs(known, "a100")...)}, nil)
	back := NewInventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", v1tGPUs(all, "a100")...)}, nil)
	r := rand.New(rand.NewPCG(3, 4))
	var held []*resourcev1.ResourceClaim
	st := NewState(inv, nil, nil)
	for step := range 300 {
		if len(held) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(held))
			st = st.WithoutAllocated(held[i])
			held = append(held[:i], held[i+1:]...)
		} else {
			dev := fmt.Sprintf("gpu-%d", r.IntN(all))
			c := v1tAllocated(fmt.Sprintf("c%d", step), "node-a", v1tGPU+"/node-a/"+dev)
			c.UID = k8stypes.UID(fmt.Sprintf("uid-%d", step))
			if r.IntN(2) == 0 {
				c.Status.Allocation.Devices.Results[0].ShareID = ptr(v1ShareID(c, "r", dev))
			}
			st = st.WithAllocated(c)
			held = append(held, c)
		}
		fresh := NewState(inv, held, nil)
		for i := range all {
			dev := fmt.Sprintf("gpu-%d", i)
			n1, _ := st.Shares(v1tGPU, "node-a", dev)
			n2, _ := fresh.Shares(v1tGPU, "node-a", dev)
			want := false
			for _, c := range held {
				want = want || c.Status.Allocation.Devices.Results[0].Device == dev
			}
			if got := st.InUse(v1tGPU, "node-a", dev); got != want || fresh.InUse(v1tGPU, "node-a", dev) != want || n1 != n2 {
				t.Fatalf("step %d: %s: derived in use %v with %d shares, recount %v with %d, want in use %v",
					step, dev, got, n1, fresh.InUse(v1tGPU, "node-a", dev), n2, want)
			}
		}
		again := NewState(back, held, nil)
		for i := range all {
			dev := fmt.Sprintf("gpu-%d", i)
			if again.InUse(v1tGPU, "node-a", dev) != fresh.InUse(v1tGPU, "node-a", dev) {
				t.Fatalf("step %d: %s: in use %v once its slice is back, %v without it", step, dev,
					again.InUse(v1tGPU, "node-a", dev), fresh.InUse(v1tGPU, "node-a", dev))
			}
		}
	}
}
