package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
)

// TestAllocateV1Deadline: a context that ends before or during the search
// gives ErrDeadline, never "does not fit".
func TestAllocateV1Deadline(t *testing.T) {
	var devs []resourcev1.Device
	for i := range 96 {
		devs = append(devs, v1tDev(fmt.Sprintf("gpu-%02d", i), v1tInt("n", int64(i))))
	}
	inv := NewInventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", devs...)}, nil)
	st := NewState(inv, nil, nil)
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
			inv := NewInventory(shuffled, nil)
			res := v1tAllocate(t, NewState(inv, nil, nil), v1tNode("node-a"), classes, claims...)
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

// TestV1StateCopyOnWrite: derived states leave their parent as it was.
func TestV1StateCopyOnWrite(t *testing.T) {
	inv := NewInventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", v1tGPUs(200, "a100")...)}, nil)
	base := NewState(inv, nil, nil)
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
	st := NewState(NewInventory(slices_, nil), nil, nil)
	node := v1tNode("node-a")
	for _, tc := range []struct {
		quarters int64
		fits     bool
	}{{16, true}, {17, false}} {
		claims := v1tClaims(v1tClaim("a", v1tExact("h", "gpu", 8, `device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) == 0`)),
			v1tClaim("b", v1tExact("q", "gpu", tc.quarters, `device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) == 0`)))
		req := PrepareV1(nil, claims, v1tClassFunc(v1tClasses()))
		found, steps, rs, err := req.Probe(context.Background(), &st.State, NodeOf(node))
		if len(rs) > 0 {
			t.Fatal(rs)
		}
		if err != nil || found != tc.fits || steps > 200 {
			t.Errorf("%d quarters: found %v after %d steps (%v)", tc.quarters, found, steps, err)
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
	st := NewState(NewInventory([]*resourcev1.ResourceSlice{v1tSlice("g", v1tGPU, "node-a", "node-a", devs...)}, nil), nil, nil)
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
		found, steps, rs, err := req.Probe(context.Background(), &st.State, NodeOf(v1tNode("node-a")))
		if len(rs) > 0 {
			t.Fatal(rs)
		}
		if err != nil || found || steps > tc.steps {
			t.Errorf("%s: found %v after %d steps, want none within %d (%v)", tc.name, found, steps, tc.steps, err)
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
	st := NewState(NewInventory(nil, []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 8)}), nil, nil)
	for _, tc := range []struct {
		quarters int64
		fits     bool
	}{{20, true}, {21, false}} {
		claims := v1tClaims(v1tClaim("c",
			v1tExact("h", "seed", 5, `device.capacity["gpu"].memory.compareTo(quantity("16Gi")) == 0`),
			v1tExact("q", "seed", tc.quarters, `device.capacity["gpu"].memory.compareTo(quantity("8Gi")) == 0`)))
		req := PrepareV1(nil, claims, v1tClassFunc(v1tClasses()))
		found, steps, rs, err := req.Probe(context.Background(), &st.State, NodeOf(v1tNode("node-a")))
		if len(rs) > 0 {
			t.Fatal(rs)
		}
		if err != nil || found != tc.fits || steps > 500 {
			t.Errorf("%d quarters: found %v after %d steps (%v)", tc.quarters, found, steps, err)
		}
		if res := v1tAllocate(t, st, v1tNode("node-a"), nil, claims...); res.Fits != tc.fits {
			t.Errorf("%d quarters: fits %v %v", tc.quarters, res.Fits, res.Reasons)
		}
	}
}
