package dradiff

import (
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestCheckerCatches is the checker's own proof that it can fail: every
// allocation upstream makes on the first cases passes it, and broken
// copies of them do not.
func TestCheckerCatches(t *testing.T) {
	mutations := []struct {
		name string
		f    func(c *Case, rs []*resourcev1.AllocationResult) bool
	}{
		{"drop a device", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			d := &rs[0].Devices
			d.Results = d.Results[:len(d.Results)-1]
			return true
		}},
		{"repeat a device", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			d := &rs[0].Devices
			d.Results = append(d.Results, d.Results[0])
			return true
		}},
		{"unknown request", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			rs[0].Devices.Results[0].Request = "nope"
			return true
		}},
		{"unknown device", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			rs[0].Devices.Results[0].Device = "no-such-device"
			return true
		}},
		{"flip adminAccess", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			r := &rs[0].Devices.Results[0]
			r.AdminAccess = ptr.To(!ptr.Deref(r.AdminAccess, false))
			return true
		}},
		{"take an allocated device", func(c *Case, rs []*resourcev1.AllocationResult) bool {
			r := &rs[0].Devices.Results[0]
			if len(c.Holes) == 0 || ptr.Deref(r.AdminAccess, false) {
				return false
			}
			r.Driver, r.Pool, r.Device = c.Holes[0].Driver, c.Holes[0].Pool, c.Holes[0].Device
			return true
		}},
		{"drop a share's shareID", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			r := firstShare(rs)
			if r == nil {
				return false
			}
			r.ShareID = nil
			return true
		}},
		{"shrink a share's consumedCapacity", func(_ *Case, rs []*resourcev1.AllocationResult) bool {
			r := firstShare(rs)
			if r == nil {
				return false
			}
			for n, q := range r.ConsumedCapacity {
				if q.Sign() > 0 {
					r.ConsumedCapacity[n] = *resource.NewMilliQuantity(q.MilliValue()-1, q.Format)
					return true
				}
			}
			return false
		}},
		{"overcommit a shared device", func(c *Case, rs []*resourcev1.AllocationResult) bool {
			r := firstShare(rs)
			if r == nil || ptr.Deref(r.AdminAccess, false) {
				return false
			}
			// Enough further shares of the device, with IDs of their own,
			// to pass its capacity, in the claim of the first.
			for _, a := range rs {
				if len(a.Devices.Results) > 0 && &a.Devices.Results[0] != r && !containsResult(a, r) {
					continue
				}
				base := *r.DeepCopy()
				for i := range 40 {
					extra := *base.DeepCopy()
					extra.ShareID = ptr.To(types.UID(fmt.Sprintf("ffffffff-0000-4000-8000-%012d", i)))
					a.Devices.Results = append(a.Devices.Results, extra)
				}
				return true
			}
			return false
		}},
	}
	caught := map[string]int{}
	tried := map[string]int{}
	for i := range min(*flagCases, 400) {
		c := genCase(*flagSeed, i)
		for _, node := range c.Nodes {
			o := runUpstream(c, c.Claims, node, *flagLimit)
			if o.kind != fit {
				continue
			}
			k := newChecker(c, node)
			if probs := k.check(ptrs(o.results)); len(probs) > 0 {
				t.Fatalf("case %d on %s: the checker rejects upstream: %v", i, node.Name, probs)
			}
			for _, m := range mutations {
				rs := make([]*resourcev1.AllocationResult, len(o.results))
				for j := range o.results {
					rs[j] = o.results[j].DeepCopy()
				}
				if len(rs[0].Devices.Results) == 0 || !m.f(c, rs) {
					continue
				}
				tried[m.name]++
				if len(k.check(rs)) > 0 {
					caught[m.name]++
				} else {
					t.Errorf("case %d on %s: mutation %q passes the checker:\n%s", i, node.Name, m.name, dumpResults(rs))
				}
			}
		}
	}
	for _, m := range mutations {
		if tried[m.name] == 0 {
			t.Errorf("mutation %q never applied", m.name)
		}
	}
	t.Logf("mutations caught: %v", caught)
}

// firstShare is the first result with a shareID, or nil.
func firstShare(rs []*resourcev1.AllocationResult) *resourcev1.DeviceRequestAllocationResult {
	for _, a := range rs {
		for i := range a.Devices.Results {
			if a.Devices.Results[i].ShareID != nil {
				return &a.Devices.Results[i]
			}
		}
	}
	return nil
}

func containsResult(a *resourcev1.AllocationResult, r *resourcev1.DeviceRequestAllocationResult) bool {
	for i := range a.Devices.Results {
		if &a.Devices.Results[i] == r {
			return true
		}
	}
	return false
}
