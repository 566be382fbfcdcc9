package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Random small cases, checked against a brute-force enumeration that
// shares nothing with the search but the inventory: whether the claims
// fit, and which combination of subrequests wins.

// Selectors by class: any and gpu see the plain devices, seed the
// projected ones.
var v1tRandomSelectors = map[string][]string{
	"gpu": {
		"", "",
		`"kind" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].kind == "x"`,
		`"kind" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].kind == "y"`,
		`"numa" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].numa < 2`,
	},
	"seed": {
		"",
		`device.capacity["gpu"].memory.compareTo(quantity("8Gi")) == 0`,
		`device.capacity["gpu"].memory.compareTo(quantity("16Gi")) >= 0`,
	},
	"any": {"", `device.driver == "gpu" || "kind" in device.attributes["gpu.example.com"]`},
}

// v1tRandomCase: devices on node-a of a plain pool, a pool with shared
// counters and (in the full variant) no seed; claims with one or two
// requests of every kind.
func v1tRandomCase(rng *rand.Rand, n int, seed bool) ([]*resourcev1.ResourceSlice, []V1Claim, []*resourcev1.DeviceClass) {
	var plain, parts []resourcev1.Device
	for i := range n {
		opts := []v1tOpt{v1tStr("kind", []string{"x", "y"}[rng.IntN(2)]), v1tInt("numa", int64(rng.IntN(3)))}
		if rng.IntN(6) == 0 {
			opts = append(opts, v1tTaint("t", "", resourcev1.DeviceTaintEffectNoSchedule))
		}
		if rng.IntN(2) == 0 {
			plain = append(plain, v1tDev(fmt.Sprintf("d%d", i), opts...))
		} else {
			opts = append(opts, v1tConsumes(fmt.Sprintf("set%d", rng.IntN(2)), fmt.Sprintf("mem=%d", 1+rng.IntN(2))))
			parts = append(parts, v1tDev(fmt.Sprintf("p%d", i), opts...))
		}
	}
	slices_ := []*resourcev1.ResourceSlice{v1tSlice("plain", v1tGPU, "node-a", "node-a", plain...)}
	if len(parts) > 0 {
		slices_ = append(slices_, v1tSliceCount(3,
			v1tCounterSlice("c0", v1tGPU, "node-a-parts", "node-a", "set0", fmt.Sprintf("mem=%d", 1+rng.IntN(3))),
			v1tCounterSlice("c1", v1tGPU, "node-a-parts", "node-a", "set1", fmt.Sprintf("mem=%d", 1+rng.IntN(3))),
			v1tSlice("parts", v1tGPU, "node-a-parts", "node-a", parts...))...)
	}
	return slices_, v1tRandomClaims(rng, seed), v1tClasses()
}

// v1tRandomGPUs: identical partitionable GPUs as counter sets (whole,
// two halves, two quarters of a 4-unit set), so that the search's
// symmetry between untouched sets is exercised; claims as above.
func v1tRandomGPUs(rng *rand.Rand) []*resourcev1.ResourceSlice {
	n := 2 + rng.IntN(2)
	var out []*resourcev1.ResourceSlice
	var parts []resourcev1.Device
	for g := range n {
		set := fmt.Sprintf("gpu%d", g)
		out = append(out, v1tCounterSlice("c"+set, v1tGPU, "node-a-parts", "node-a", set, "mem=4"))
		kind := v1tStr("kind", "x")
		parts = append(parts, v1tDev(set+"-whole", kind, v1tInt("numa", int64(g%2)), v1tConsumes(set, "mem=4")))
		for h := range 2 {
			parts = append(parts, v1tDev(fmt.Sprintf("%s-half%d", set, h), v1tStr("kind", "y"), v1tInt("numa", int64(g%2)), v1tConsumes(set, "mem=2")))
		}
		for q := range 2 {
			parts = append(parts, v1tDev(fmt.Sprintf("%s-quarter%d", set, q), v1tStr("kind", "y"), v1tInt("numa", int64(g%2)), v1tConsumes(set, "mem=1")))
		}
	}
	return v1tSliceCount(int64(n+1), append(out, v1tSlice("parts", v1tGPU, "node-a-parts", "node-a", parts...))...)
}

func v1tRandomClaims(rng *rand.Rand, seed bool) []V1Claim {
	classes := []string{"any", "gpu", "gpu"}
	if seed {
		classes = append(classes, "seed", "seed")
	}
	var claims []V1Claim
	for c := range 1 + rng.IntN(2) {
		var reqs []resourcev1.DeviceRequest
		admin := false
		for r := range 1 + rng.IntN(2) {
			name := fmt.Sprintf("r%d", r)
			sel := func(class string) []string {
				list := v1tRandomSelectors[class]
				if s := list[rng.IntN(len(list))]; s != "" {
					return []string{s}
				}
				return nil
			}
			class := classes[rng.IntN(len(classes))]
			switch k := rng.IntN(12); {
			case k < 6:
				req := v1tExact(name, class, int64(1+rng.IntN(2)), sel(class)...)
				if rng.IntN(4) == 0 {
					req = v1tTolerate(req, resourcev1.DeviceToleration{Key: "t", Operator: resourcev1.DeviceTolerationOpExists})
				}
				if rng.IntN(8) == 0 {
					req, admin = v1tAdmin(req), true
				}
				reqs = append(reqs, req)
			case k < 7:
				reqs = append(reqs, v1tAll(name, class, sel(class)...))
			default:
				var subs []resourcev1.DeviceSubRequest
				for s := range 2 + rng.IntN(2) {
					class := classes[rng.IntN(len(classes))]
					subs = append(subs, v1tSub(fmt.Sprintf("s%d", s), class, int64(1+rng.IntN(3)), sel(class)...))
				}
				reqs = append(reqs, v1tFirst(name, subs...))
			}
		}
		claim := v1tClaim(fmt.Sprintf("c%d", c), reqs...)
		switch rng.IntN(8) {
		case 0:
			v1tConstrain(claim, v1tMatch(v1tGPU+"/numa"))
		case 1:
			v1tConstrain(claim, v1tDistinct(v1tGPU+"/kind", "r0"))
		case 2:
			v1tConstrain(claim, v1tMatch(v1tGPU+"/kind", "r1"))
		}
		claims = append(claims, V1Claim{Claim: claim, AdminNamespace: admin})
	}
	return claims
}

// TestAllocateV1AgainstBruteForce: on random small cases with plain
// devices, shared counters, taints, seed partitions and devices in use,
// AllocateV1 fits exactly when an enumeration of every combination and
// every set of devices finds an allocation, picks the same combination of
// subrequests (the first in order that fits), and returns a valid
// allocation (v1tCheckValid).
func TestAllocateV1AgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fits := 0
	const rounds = 400
	for round := range rounds {
		withSeed := rng.IntN(2) == 0
		slices_, claims, classes := v1tRandomCase(rng, 3+rng.IntN(6), withSeed)
		if round%3 == 2 {
			slices_ = v1tRandomGPUs(rng)
		}
		var seed []*resourceapi.NodeResourceSlice
		var seedUse []*resourceapi.ResourceClaim
		if withSeed {
			seed = []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 1+rng.IntN(2))}
			if rng.IntN(2) == 0 {
				seedUse = append(seedUse, allocatedClaim("s", "node-a", "gpu", []string{"gpu-0/quarter/quarter-1", "gpu-0/half/half-1"}[rng.IntN(2)]))
			}
		}
		inv := NewInventory(slices_, seed)
		var inUse []*resourcev1.ResourceClaim
		for _, p := range inv.Pools() {
			for _, d := range p.Devices {
				if d.SeedInstance == "" && rng.IntN(6) == 0 {
					inUse = append(inUse, v1tAllocated("u-"+d.Name, "", p.Driver+"/"+p.Name+"/"+d.Name))
				}
			}
		}
		st := NewState(inv, inUse, seedUse)
		node := v1tNode("node-a")
		req := PrepareV1(&corev1.Pod{}, claims, v1tClassFunc(classes))
		if len(req.Unresolvable()) > 0 {
			t.Fatalf("round %d: %v", round, req.Unresolvable())
		}
		res := v1tAllocate(t, st, node, classes, claims...)
		want := v1tBruteForce(t, st, node, req)
		if res.Fits != (want != nil) {
			t.Fatalf("round %d: fits %v, brute force %v; devices %v reasons %v\nclaims %s\ninventory %s", round, res.Fits, want, v1tDevices(res), res.Reasons,
				v1tDescribe(claims), v1tDescribeInv(st))
		}
		if !res.Fits {
			for _, r := range res.Reasons {
				v1tReasonCount[r.Code]++
			}
			if len(res.Reasons) == 0 {
				t.Fatalf("round %d: no reasons", round)
			}
			continue
		}
		fits++
		var got []string
		for ci := range req.claims {
			seen := map[string]bool{}
			for _, r := range res.Allocations[ci].Devices.Results {
				if !seen[r.Request] {
					seen[r.Request] = true
				}
			}
			for _, q := range req.Reqs[ci] {
				for _, a := range q.Alts {
					if seen[a.Name] {
						got = append(got, a.Name)
					}
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: alternatives %v, brute force %v\nclaims %s", round, got, want, v1tDescribe(claims))
		}
	}
	if fits < rounds/4 || fits > rounds*3/4 {
		t.Errorf("%d of %d cases fit: the generator is off balance %v", fits, rounds, v1tReasonCount)
	}
}

var v1tReasonCount = map[ReasonCode]int{}

func v1tDescribeInv(st *State) string {
	var b strings.Builder
	for _, p := range st.Inventory().Pools() {
		fmt.Fprintf(&b, "\npool %s/%s counters %v", p.Driver, p.Name, p.Counters)
		for _, d := range p.Devices {
			fmt.Fprintf(&b, "\n  %s in use %v: %s taints %v consumes %v", d.Name, st.InUse(p.Driver, p.Name, d.Name), invFormatAttrs(d.Attributes), d.Taints, d.ConsumesCounters)
		}
	}
	return b.String()
}

func v1tDescribe(claims []V1Claim) string {
	var b strings.Builder
	for _, c := range claims {
		fmt.Fprintf(&b, "\n%s: %+v", c.Claim.Name, c.Claim.Spec.Devices)
	}
	return b.String()
}

// v1tBruteForce returns the names of the alternatives of the first
// combination, in request order, for which an allocation exists; nil when
// none does.
func v1tBruteForce(t *testing.T, st *State, node *corev1.Node, req *V1Request) []string {
	inv := st.Inventory()
	var all []*engine.Req
	for ci := range req.claims {
		for qi := range req.Reqs[ci] {
			all = append(all, &req.Reqs[ci][qi])
		}
	}
	var devs []int32 // every device of the node in usable pools
	for x := range int32(inv.Len()) {
		if p, d := inv.At(x); p.Usable() && DeviceAvailableOn(d, node) {
			devs = append(devs, x)
		}
	}
	inUse := func(x int32) bool {
		p, d := inv.At(x)
		return st.InUse(p.Driver, p.Name, d.Name) || (d.SeedInstance != "" && st.SchemeLocked(p.Driver, p.Name, d.SeedInstance))
	}
	matches := func(a *engine.Alt, x int32) bool {
		for _, expr := range slices.Concat(a.ClassSel, a.Sel) {
			ok, err := engine.MatchDeviceSelector(expr, v1tInput(inv.At(x)))
			if err != nil {
				t.Fatalf("selector %s: %v", expr, err)
			}
			if !ok {
				return false
			}
		}
		return true
	}
	// Counters left in the state, exactly.
	left := map[string]resource.Quantity{}
	ckey := func(pool *engine.Pool, set, name string) string { return fmt.Sprintf("%p/%s/%s", pool, set, name) }
	for pi := range inv.Pools() {
		p := &inv.Pools()[pi]
		for set, cs := range p.Counters {
			for name, q := range cs {
				left[ckey(p, set, name)] = q.DeepCopy()
			}
		}
	}
	consume := func(x int32, sign int) {
		p, d := inv.At(x)
		for _, cc := range d.ConsumesCounters {
			for name, c := range cc.Counters {
				k := ckey(p, cc.CounterSet, name)
				q := left[k]
				if sign > 0 {
					q.Sub(c.Value)
				} else {
					q.Add(c.Value)
				}
				left[k] = q
			}
		}
	}
	for _, x := range devs {
		p, d := inv.At(x)
		if st.InUse(p.Driver, p.Name, d.Name) {
			consume(x, 1)
		}
	}
	// Only counters the picks consume can fail them (an allocation may
	// already overdraw one in the state).
	left0 := map[string]resource.Quantity{}
	for k, q := range left {
		left0[k] = q.DeepCopy()
	}
	countersOK := func() bool {
		for k, q := range left {
			if q.Sign() < 0 && q.Cmp(left0[k]) < 0 {
				return false
			}
		}
		return true
	}
	type pick struct {
		claim int
		req   string
		alt   *engine.Alt
		x     int32
	}
	var picks []pick
	valid := func() bool {
		if !countersOK() {
			return false
		}
		for i, p := range picks {
			for _, q := range picks[:i] {
				if p.x == q.x && (p.claim == q.claim || (!p.alt.Admin && !q.alt.Admin)) {
					return false
				}
				ap, a := inv.At(p.x)
				bp, b := inv.At(q.x)
				if !p.alt.Admin && !q.alt.Admin && ap == bp && a.SeedInstance != "" && b.SeedInstance != "" &&
					engine.SeedLeavesConflict(a.SeedInstance, b.SeedInstance) {
					return false
				}
			}
		}
		for ci := range req.claims {
			n := 0
			for _, p := range picks {
				if p.claim == ci {
					n++
				}
			}
			if n > 32 {
				return false
			}
			for _, c := range req.Cons[ci] {
				var vals []string
				for _, p := range picks {
					if p.claim == ci && c.Applies(p.req, p.alt) {
						vals = append(vals, inv.ConstraintValue(p.x, c.Attr))
					}
				}
				for i, v := range vals {
					if v == "" {
						return false
					}
					for _, w := range vals[:i] {
						if c.Match && v != w || !c.Match && v == w {
							return false
						}
					}
				}
			}
		}
		return true
	}
	candidates := func(a *engine.Alt) (cands []int32, ok bool) {
		var matched []int32
		for _, x := range devs {
			if matches(a, x) {
				matched = append(matched, x)
			}
		}
		if a.All {
			if len(matched) == 0 || len(matched) > 32 {
				return nil, false
			}
			for _, x := range matched {
				if _, d := inv.At(x); engine.Untolerated(d.Taints, a.Tolerations) != nil || (!a.Admin && inUse(x)) {
					return nil, false
				}
			}
			return matched, true
		}
		for _, x := range matched {
			if _, d := inv.At(x); engine.Untolerated(d.Taints, a.Tolerations) == nil && (a.Admin || !inUse(x)) {
				cands = append(cands, x)
			}
		}
		return cands, true
	}
	var assign func(r int, combo []*engine.Alt) bool
	assign = func(r int, combo []*engine.Alt) bool {
		if r == len(all) {
			return true
		}
		a := combo[r]
		cands, ok := candidates(a)
		if !ok {
			return false
		}
		var choose func(start, left int) bool
		choose = func(start, k int) bool {
			if k == 0 || a.All && start == len(cands) {
				return assign(r+1, combo)
			}
			for i := start; i < len(cands); i++ {
				picks = append(picks, pick{claim: all[r].Claim, req: all[r].Name, alt: a, x: cands[i]})
				if !a.Admin {
					consume(cands[i], 1)
				}
				ok := valid() && choose(i+1, k-1)
				if !a.Admin {
					consume(cands[i], -1)
				}
				picks = picks[:len(picks)-1]
				if ok {
					return true
				}
				if a.All {
					return false
				}
			}
			return false
		}
		k := a.Count
		if a.All {
			k = len(cands)
		}
		return choose(0, k)
	}
	var combo []*engine.Alt
	var try func(r int) []string
	try = func(r int) []string {
		if r == len(all) {
			if assign(0, combo) {
				var names []string
				for _, a := range combo {
					names = append(names, a.Name)
				}
				return names
			}
			return nil
		}
		for i := range all[r].Alts {
			combo = append(combo, &all[r].Alts[i])
			if got := try(r + 1); got != nil {
				return got
			}
			combo = combo[:len(combo)-1]
		}
		return nil
	}
	return try(0)
}
