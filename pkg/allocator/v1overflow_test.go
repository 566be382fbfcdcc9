package allocator

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"allot.dev/allot/pkg/allocator/engine"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A device consuming 1e400 of a shared counter of 8 is not allocated: the
// counter's scale used to stop at 10^60, and 1e400 in units of 10^60
// wrapped around int64 to an amount that fit.
func TestV1CounterOverflowNeverFits(t *testing.T) {
	for _, huge := range []string{"1e400", "1e80", "9223372036854775808", "100000000000000000000000000"} {
		t.Run(huge, func(t *testing.T) {
			slices := v1tSliceCount(2,
				v1tCounterSlice("counters", v1tGPU, "part", "node-a", "set", "units=8"),
				v1tSlice("devs", v1tGPU, "part", "node-a",
					v1tDev("huge", v1tStr("kind", "huge"), v1tConsumes("set", "units="+huge)),
					v1tDev("small", v1tStr("kind", "small"), v1tConsumes("set", "units=8"))))
			inv := NewInventory(slices, nil)
			st := NewState(inv, nil, nil)
			node := v1tNode("node-a")
			res := v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("c", v1tExact("r", "gpu", 1, `device.attributes["gpu.example.com"].kind == "huge"`)))...)
			if res.Fits {
				t.Fatalf("a device consuming %s of a counter of 8 was allocated: %v", huge, v1tDevices(res))
			}
			if !strings.Contains(fmt.Sprint(res.Reasons), "counter") {
				t.Fatalf("refused for another reason than its counter: %v", res.Reasons)
			}
			// The device that fits still does, and the huge one
			// does not change the small one's arithmetic.
			res = v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("d", v1tExact("r", "gpu", 1, `device.attributes["gpu.example.com"].kind == "small"`)))...)
			if !res.Fits {
				t.Fatalf("the device consuming 8 of 8 does not fit next to one consuming %s: %+v", huge, res)
			}
			// A stored allocation of the huge device (a driver that
			// changed its slice) leaves nothing of the counter.
			st = NewState(inv, []*resourcev1.ResourceClaim{v1tAllocated("held", "node-a", v1tGPU+"/part/huge")}, nil)
			res = v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("e", v1tExact("r", "gpu", 1, `device.attributes["gpu.example.com"].kind == "small"`)))...)
			if res.Fits {
				t.Fatalf("a counter held by a device consuming %s still fits 8 more", huge)
			}
		})
	}
}

// FuzzCounterArithmetic: for a counter total and consumptions of any size,
// the inventory's amounts never wrap, and the counter's decision for any
// prefix of the devices taken together (what the search does: subtract
// the amounts of the picks from what is left) agrees with exact math/big
// arithmetic whenever the exact answer is "does not fit" (no
// overcommitment ever), and whenever every value is a whole number of
// milli-units below 2^50 (no refusal where the arithmetic is exact).
func FuzzCounterArithmetic(f *testing.F) {
	f.Add("8", "1e400", "1", "7")
	f.Add("8", "9223372036854775807", "9223372036854775807", "2")
	f.Add("1e400", "1e400", "1", "1e399")
	f.Add("100000000000000000000000000", "1e26", "1", "0")
	f.Add("9223372036854775807", "4611686018427387904", "4611686018427387904", "1")
	f.Add("1125899906842624", "562949953421312", "562949953421312", "1")
	f.Add("1.5", "500m", "1", "1m")
	f.Add("80Gi", "40Gi", "40Gi", "1Ki")
	f.Add("1e1000", "1e999", "1e-1000", "1")
	f.Fuzz(func(t *testing.T, total, a, b, c string) {
		// The API server refuses a long exponent before parsing it
		// (api/validation.ValidateQuantityTexts): apimachinery's parser
		// takes minutes on 1e-1111110000.
		for _, s := range []string{total, a, b, c} {
			if longExponentText.MatchString(s) {
				return
			}
		}
		qt, err := resource.ParseQuantity(total)
		if err != nil || qt.Sign() < 0 || !exponentAdmitted(qt) {
			return
		}
		var uses []resource.Quantity
		for _, s := range []string{a, b, c} {
			q, err := resource.ParseQuantity(s)
			if err != nil || q.Sign() < 0 || !exponentAdmitted(q) {
				return
			}
			uses = append(uses, q)
		}
		var devs []resourcev1.Device
		for i, q := range uses {
			devs = append(devs, resourcev1.Device{Name: string(rune('a' + i)), ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
				CounterSet: "set", Counters: map[string]resourcev1.Counter{"n": {Value: q}}}}})
		}
		inv := NewInventory(v1tSliceCount(2,
			&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "counters"}, Spec: resourcev1.ResourceSliceSpec{Driver: v1tGPU, Pool: resourcev1.ResourcePool{Name: "p", Generation: 1},
				NodeName: ptrTo("n"), SharedCounters: []resourcev1.CounterSet{{Name: "set", Counters: map[string]resourcev1.Counter{"n": {Value: qt}}}}}},
			&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "devices"}, Spec: resourcev1.ResourceSliceSpec{Driver: v1tGPU, Pool: resourcev1.ResourcePool{Name: "p", Generation: 1},
				NodeName: ptrTo("n"), Devices: devs}}), nil)
		if len(inv.Counters()) != 1 || inv.Len() != len(uses) {
			t.Fatalf("inventory: %d counters, %d devices", len(inv.Counters()), inv.Len())
		}
		ctr := inv.Counters()[0]
		if ctr.Total < 0 || ctr.Total > 1<<50 {
			t.Fatalf("total %s: %d units of 10^%d", total, ctr.Total, ctr.Scale)
		}
		exactTotal := ratOf(qt)
		exactUsed := new(big.Rat)
		left := ctr.Total
		wholeMilli := isWholeMilliBelow(qt)
		for i := range inv.Len() {
			u := inv.Uses(int32(i))[0].Amount
			if u < 0 || u > engine.AmountNever {
				t.Fatalf("consumption %s: amount %d", uses[i].String(), u)
			}
			wholeMilli = wholeMilli && isWholeMilliBelow(uses[i])
			exactUsed.Add(exactUsed, ratOf(uses[i]))
			exactFits := exactUsed.Cmp(exactTotal) <= 0
			fits := left >= u // fitsIn's comparison
			if fits && !exactFits {
				t.Fatalf("total %s, consumptions %v: device %d fits by the allocator's arithmetic (%d left, takes %d) but not exactly", total, uses, i, left, u)
			}
			if wholeMilli && ctr.Scale == resource.Milli && fits != exactFits {
				t.Fatalf("total %s, consumptions %v: device %d fits=%v, exactly %v", total, uses, i, fits, exactFits)
			}
			if !fits {
				return
			}
			left -= u // pick's arithmetic
			if left < 0 {
				t.Fatalf("left went negative: %d", left)
			}
		}
		// The state's sums saturate instead of wrapping.
		for _, x := range []int64{math.MaxInt64, math.MinInt64, ctr.Total, -ctr.Total, engine.AmountNever} {
			for _, y := range []int64{math.MaxInt64, math.MinInt64, 1, -1, engine.AmountNever} {
				want := new(big.Int).Add(big.NewInt(x), big.NewInt(y))
				want = bigClamp(want)
				if got := engine.AddSat(x, y); got != want.Int64() {
					t.Fatalf("AddSat(%d, %d) = %d, want %s", x, y, got, want)
				}
			}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

var longExponentText = regexp.MustCompile(`[eE][+-]?0*[0-9]{5,}`)

// exponentAdmitted: validation refuses amounts with a decimal exponent
// beyond ±1000 (api/validation.MaxQuantityExponent): apimachinery's
// comparison of 0E4444440 alone takes half a second.
func exponentAdmitted(q resource.Quantity) bool {
	d := q.AsDec()
	return d.Scale() <= 1000 && d.Scale() >= -1000
}

func ratOf(q resource.Quantity) *big.Rat {
	d := q.AsDec()
	r := new(big.Rat).SetInt(d.UnscaledBig())
	scale := int64(d.Scale())
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(scale)), nil)
	if scale > 0 {
		return r.Quo(r, new(big.Rat).SetInt(p))
	}
	return r.Mul(r, new(big.Rat).SetInt(p))
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// isWholeMilliBelow: q is a whole number of thousandths below 2^50 of them.
func isWholeMilliBelow(q resource.Quantity) bool {
	r := ratOf(q)
	r.Mul(r, big.NewRat(1000, 1))
	return r.IsInt() && r.Num().Cmp(big.NewInt(1<<50)) <= 0
}

func bigClamp(v *big.Int) *big.Int {
	if v.Cmp(big.NewInt(math.MaxInt64)) > 0 {
		return big.NewInt(math.MaxInt64)
	}
	if v.Cmp(big.NewInt(math.MinInt64)) < 0 {
		return big.NewInt(math.MinInt64)
	}
	return v
}
