package engine

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Inventory is every device of the cluster in resource.k8s.io/v1 terms:
// the pools of the published v1 ResourceSlices (V1Pools) and the projection
// of the seed NodeResourceSlices (SeedDevices), indexed for AllocateV1. It
// is immutable and safe for concurrent use; it caches selector results per
// device, so keep one per version of the slices.
type Inventory struct {
	pools    []Pool
	problems []InventoryProblem

	devs []v1dev
	// byPool and byName are Lookup's index, 4 bytes a device: byName
	// holds the devices of each driver and pool name (one pool, or a v1
	// pool and the seed projection that clashes with it) sorted by name,
	// stably, group g's from groupStart[g] to groupStart[g+1].
	byPool     map[[2]string]int32 // driver and pool name → group
	byName     []int32
	groupStart []int32
	poolKeys   []string           // per pool with seed devices: SchemeKey(driver, name)
	byNode     map[string][]int32 // devices whose NodeName is the node, ascending
	elsewhere  []int32            // devices with a node selector or allNodes, ascending
	// unusable lists the pools that offer nothing (Incomplete or Invalid);
	// an allocation mode All request fails on a node one of them reaches.
	unusable []int32
	ctrs     []Counter // every shared counter of every pool
	groups   [][]int32 // devices that affect each other: a counter set's consumers, a seed root's leaves

	matches  sync.Map // selector → *v1matchCache
	nMatches atomic.Int32
	attrKeys sync.Map // attribute name → []string, per device (v1AttrKey)
	nAttrs   atomic.Int32
}

// v1dev is one device as the allocator sees it.
type v1dev struct {
	pool int32
	d    *Device
	// canon is the device's index in the state: its own, or that of the
	// first device of the inventory with the same driver, pool and name
	// (inconsistent input), which the state counts for both.
	canon int32
	input DeviceSelectorInput
	uses  []CounterUse // shared counters it consumes
	// multi: allowMultipleAllocations; caps are then its capacities, in
	// the units its shares are summed in.
	multi  bool
	caps   []ShareCap
	groups []int32 // the groups it belongs to
	// seedGroup is the group of the device's seed root instance (-1 for v1
	// devices), seedPos its position there and seedConflicts the members it
	// cannot be allocated together with (SeedLeavesConflict), as a bitset.
	seedGroup     int32
	seedPos       int32
	seedConflicts []uint64
}

// v1use is how much of one counter a device consumes, in the counter's
// scale.
type CounterUse struct {
	Counter int32
	Amount  int64
}

// v1ctr is one counter of a pool's counter set. Values are int64 in units
// of 10^scale: the finest scale of 10^3 steps, from milli up (without an
// upper end: 1e400 has a scale too), at which the total and every
// consumption of the counter in its pool that is not above the total stay
// below 2^50. A consumption above the total can never fit: it counts as
// v1Never, more than any total. So every amount is below 2^53, a search's
// sums and differences stay far from int64's ends, and the state's sums
// of allocated amounts saturate (v1AddSat). Where a value is not a whole
// number of units, the total is rounded down and consumption up:
// conservative, never overcommitting.
type Counter struct {
	pool      int32
	Set, Name string
	Total     int64
	Scale     resource.Scale
	format    resource.Format    // of the total, for messages
	exact     *resource.Quantity // the total as published
}

// v1Key is the key of a device the inventory does not know in the
// state's side map: driver, pool and device name.
func v1Key(driver, pool, device string) string {
	return driver + "\x00" + pool + "\x00" + device
}

// NewInventory indexes the pools of both front ends (sorted by
// driver and name here; a pool of a driver appears once) for the search,
// with what the front ends could not take as it is. Devices with
// SeedInstance set (projected seed leaves) carry the scheme constraint:
// the leaves of one root instance form a group, and two of them conflict
// when SeedLeavesConflict says so. The pools must not be modified
// afterwards.
func NewInventory(pools []Pool, problems []InventoryProblem) *Inventory {
	inv := &Inventory{byNode: map[string][]int32{}, pools: pools, problems: problems}
	slices.SortStableFunc(inv.pools, func(a, b Pool) int {
		return cmp.Or(strings.Compare(a.Driver, b.Driver), strings.Compare(a.Name, b.Name))
	})
	total := 0
	for pi := range inv.pools {
		total += len(inv.pools[pi].Devices)
	}
	inv.devs, inv.byPool = make([]v1dev, 0, total), make(map[[2]string]int32, len(inv.pools))
	inv.byName, inv.groupStart = make([]int32, 0, total), make([]int32, 0, len(inv.pools)+1)

	for pi := range inv.pools {
		p := &inv.pools[pi]
		if k := [2]string{p.Driver, p.Name}; pi == 0 || k != [2]string{inv.pools[pi-1].Driver, inv.pools[pi-1].Name} {
			inv.indexNames()
			inv.byPool[k] = int32(len(inv.groupStart))
			inv.groupStart = append(inv.groupStart, int32(len(inv.devs)))
		}
		if !p.Usable() {
			inv.unusable = append(inv.unusable, int32(pi))
		}
		ctrIndex := inv.addCounters(int32(pi), p)
		setGroups := map[string]int32{}
		seedRoots := map[string]int32{}
		for di := range p.Devices {
			d := &p.Devices[di]
			x := int32(len(inv.devs))
			dev := v1dev{pool: int32(pi), d: d, canon: x, seedGroup: -1,
				input: DeviceSelectorInput{Driver: p.Driver, Attributes: d.Attributes, Capacity: d.Capacity, AllowMultipleAllocations: d.AllowMultipleAllocations}}
			if d.AllowMultipleAllocations {
				dev.multi, dev.caps = true, v1Caps(d.Capacity)
			}
			for _, cc := range d.ConsumesCounters {
				g, seen := setGroups[cc.CounterSet]
				if !seen {
					g = int32(len(inv.groups))
					inv.groups = append(inv.groups, nil)
					setGroups[cc.CounterSet] = g
				}
				if !slices.Contains(dev.groups, g) {
					dev.groups = append(dev.groups, g)
					inv.groups[g] = append(inv.groups[g], x)
				}
				for _, n := range sortedKeys(cc.Counters) {
					if c, ok := ctrIndex[cc.CounterSet+"\x00"+n]; ok {
						q := cc.Counters[n].Value
						dev.uses = append(dev.uses, CounterUse{Counter: c, Amount: v1UseAmount(&q, &inv.ctrs[c])})
					}
				}
			}
			if d.SeedInstance != "" {
				if inv.poolKeys == nil {
					inv.poolKeys = make([]string, len(inv.pools))
				}
				inv.poolKeys[pi] = SchemeKey(p.Driver, p.Name)
				root, _, _ := strings.Cut(d.SeedInstance, "/")
				g, seen := seedRoots[root]
				if !seen {
					g = int32(len(inv.groups))
					inv.groups = append(inv.groups, nil)
					seedRoots[root] = g
				}
				dev.seedGroup, dev.seedPos = g, int32(len(inv.groups[g]))
				dev.groups = append(dev.groups, g)
				inv.groups[g] = append(inv.groups[g], x)
			}
			switch {
			case d.NodeName != "":
				inv.byNode[d.NodeName] = append(inv.byNode[d.NodeName], x)
			case d.NodeSelector != nil || d.AllNodes:
				inv.elsewhere = append(inv.elsewhere, x)
			}
			inv.devs = append(inv.devs, dev)
		}
	}
	inv.indexNames()
	inv.groupStart = append(inv.groupStart, int32(len(inv.devs)))
	// Partition conflicts between the leaves of each seed root.
	for x := range inv.devs {
		dev := &inv.devs[x]
		if dev.seedGroup < 0 {
			continue
		}
		members := inv.groups[dev.seedGroup]
		dev.seedConflicts = make([]uint64, (len(members)+63)/64)
		for j, y := range members {
			if int32(x) != y && SeedLeavesConflict(dev.d.SeedInstance, inv.devs[y].d.SeedInstance) {
				dev.seedConflicts[j/64] |= 1 << (j % 64)
			}
		}
	}
	return inv
}

// indexNames adds the devices of the last group, the last ones of
// inv.devs, to byName, and sets canon of a device whose name an earlier
// one of the group has.
func (inv *Inventory) indexNames() {
	start := len(inv.byName)
	for x := int32(start); x < int32(len(inv.devs)); x++ {
		inv.byName = append(inv.byName, x)
	}
	seg := inv.byName[start:]
	slices.SortStableFunc(seg, func(a, b int32) int { return strings.Compare(inv.devs[a].d.Name, inv.devs[b].d.Name) })
	for i := 1; i < len(seg); i++ {
		if prev := &inv.devs[seg[i-1]]; prev.d.Name == inv.devs[seg[i]].d.Name {
			inv.devs[seg[i]].canon = prev.canon
		}
	}
}

// lookup returns the device of a driver, pool and name (the first of
// the pool's devices with the name), if the inventory has it.
func (inv *Inventory) lookup(driver, pool, device string) (int32, bool) {
	g, ok := inv.byPool[[2]string{driver, pool}]
	if !ok {
		return -1, false
	}
	seg := inv.byName[inv.groupStart[g]:inv.groupStart[g+1]]
	i, found := slices.BinarySearchFunc(seg, device, func(x int32, name string) int { return strings.Compare(inv.devs[x].d.Name, name) })
	if !found {
		return -1, false
	}
	return seg[i], true
}

// poolKey returns SchemeKey of pool pi.
func (inv *Inventory) poolKey(pi int32) string {
	if inv.poolKeys != nil && inv.poolKeys[pi] != "" {
		return inv.poolKeys[pi]
	}
	p := &inv.pools[pi]
	return SchemeKey(p.Driver, p.Name)
}

// addCounters adds a pool's counters and returns them by "set\x00name".
func (inv *Inventory) addCounters(pi int32, p *Pool) map[string]int32 {
	if len(p.Counters) == 0 {
		return nil
	}
	out := map[string]int32{}
	for _, set := range sortedKeys(p.Counters) {
		for _, name := range sortedKeys(p.Counters[set]) {
			total := p.Counters[set][name]
			vals := []resource.Quantity{total}
			for i := range p.Devices {
				for _, cc := range p.Devices[i].ConsumesCounters {
					if c, ok := cc.Counters[name]; ok && cc.CounterSet == set && c.Value.Cmp(total) <= 0 {
						vals = append(vals, c.Value)
					}
				}
			}
			scale := v1CounterScale(vals)
			out[set+"\x00"+name] = int32(len(inv.ctrs))
			exact := total.DeepCopy()
			inv.ctrs = append(inv.ctrs, Counter{pool: pi, Set: set, Name: name, Total: v1Floor(&total, scale), Scale: scale, format: total.Format, exact: &exact})
		}
	}
	return out
}

// v1Never is the amount of a consumption above its counter's total: more
// than any total (those stay below 2^50), so it never fits, and small
// enough that sums of a few thousand of them cannot overflow.
const AmountNever = int64(1) << 52

// v1CounterScale is the finest scale of 10^3 steps, from milli up, at
// which every value is at most 2^50 units (see v1ctr). The search starts
// from a lower bound read off the value's digits, so that a value like
// 1e1000 takes a few comparisons, not hundreds.
func v1CounterScale(vals []resource.Quantity) resource.Scale {
	return v1ScaleFrom(resource.Milli, vals)
}

// v1ScaleFrom is v1CounterScale starting from another scale: the finest
// scale of 10^3 steps from start up at which every value is at most 2^50
// units.
func v1ScaleFrom(start resource.Scale, vals []resource.Quantity) resource.Scale {
	scale := start
	for _, q := range vals {
		if q.Sign() <= 0 {
			continue
		}
		c := q.DeepCopy()
		d := c.AsDec()
		// q < 10^digits, and q <= 2^50 * 10^s needs s >= digits-16.
		digits := int64(len(d.UnscaledBig().String())) - int64(d.Scale())
		if low := digits - 17; low > int64(scale) {
			scale = resource.Scale(low - (low-int64(start))%3)
		}
		for q.Cmp(*resource.NewScaledQuantity(1<<50, scale)) > 0 {
			scale += 3
		}
	}
	return scale
}

// v1UseAmount is how much of counter c a consumption q takes, in the
// counter's units: v1Never above the total.
func v1UseAmount(q *resource.Quantity, c *Counter) int64 {
	if c.exact != nil && q.Cmp(*c.exact) > 0 {
		return AmountNever
	}
	return v1Ceil(q, c.Scale)
}

// v1Ceil and v1Floor express q in units of 10^scale, rounded up and down.
// Callers keep q at most 2^50 units (v1CounterScale), so ScaledValue
// cannot wrap.
func v1Ceil(q *resource.Quantity, scale resource.Scale) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	return q.ScaledValue(scale)
}

func v1Floor(q *resource.Quantity, scale resource.Scale) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	v := q.ScaledValue(scale)
	if resource.NewScaledQuantity(v, scale).Cmp(*q) > 0 {
		v--
	}
	return v
}

// v1AddSat adds two amounts, stopping at int64's ends instead of
// wrapping.
func AddSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Pools returns the pools, sorted by driver and name. They share memory
// with the inventory: read them, never modify them.
func (inv *Inventory) Pools() []Pool { return inv.pools }

// Problems returns what the inventory could not take as it is.
func (inv *Inventory) Problems() []InventoryProblem { return inv.problems }

// nodeDevices returns the devices that can be allocated on the node
// (usable pools, available on the node), in
// inventory order, appended to into[:0], and the unusable pools that
// reach the node.
func (inv *Inventory) nodeDevices(node *Node, into []int32) (devs []int32, unusable []int32) {
	name := ""
	if node != nil {
		name = node.Name
	}
	local := inv.byNode[name]
	if node == nil {
		local = nil
	}
	devs = slices.Grow(into[:0], len(local)+len(inv.elsewhere))
	i, j := 0, 0
	for i < len(local) || j < len(inv.elsewhere) {
		var x int32
		if j >= len(inv.elsewhere) || (i < len(local) && local[i] < inv.elsewhere[j]) {
			x = local[i]
			i++
		} else {
			x = inv.elsewhere[j]
			j++
			if !inv.devs[x].d.AvailableOn(node) {
				continue
			}
		}
		d := &inv.devs[x]
		if !inv.pools[d.pool].Usable() {
			continue
		}
		devs = append(devs, x)
	}
	for _, pi := range inv.unusable {
		p := &inv.pools[pi]
		if node != nil && (p.Node == name || p.ReachesNode(node)) {
			unusable = append(unusable, pi)
		}
	}
	return devs, unusable
}

// v1matchCache holds the results of one selector on the inventory's
// devices: 0 not known yet, 1 true, 2 false, 3 an evaluation error
// (in errs).
type v1matchCache struct {
	res  []atomic.Uint32
	errs sync.Map // int32 → error
}

// v1MaxCachedSelectors bounds the selectors whose results an inventory
// keeps; others are evaluated every time.
const v1MaxCachedSelectors = 4096

// matcher returns the result cache of a selector, nil when the inventory
// caches too many selectors already.
func (inv *Inventory) matcher(expr string) *v1matchCache {
	if v, ok := inv.matches.Load(expr); ok {
		return v.(*v1matchCache)
	}
	if inv.nMatches.Load() >= v1MaxCachedSelectors {
		return nil
	}
	v, loaded := inv.matches.LoadOrStore(expr, &v1matchCache{res: make([]atomic.Uint32, len(inv.devs))})
	if !loaded {
		inv.nMatches.Add(1)
	}
	return v.(*v1matchCache)
}

// match evaluates a selector on device x, through its cache mc (which
// may be nil).
func (inv *Inventory) match(mc *v1matchCache, expr string, x int32) (bool, error) {
	if mc != nil {
		switch mc.res[x].Load() {
		case 1:
			return true, nil
		case 2:
			return false, nil
		case 3:
			if err, ok := mc.errs.Load(x); ok {
				return false, err.(error)
			}
		}
	}
	ok, err := MatchDeviceSelector(expr, inv.devs[x].input)
	if mc != nil {
		switch {
		case err != nil:
			mc.errs.Store(x, err)
			mc.res[x].Store(3)
		case ok:
			mc.res[x].Store(1)
		default:
			mc.res[x].Store(2)
		}
	}
	return ok, err
}

// attrValues returns the value keys (v1AttrKey) of an attribute for every
// device of the inventory, computed once per attribute name.
func (inv *Inventory) attrValues(name resourcev1.FullyQualifiedName) []string {
	if v, ok := inv.attrKeys.Load(name); ok {
		return v.([]string)
	}
	vals := make([]string, len(inv.devs))
	for x := range inv.devs {
		vals[x] = v1AttrKey(&inv.devs[x], name, x)
	}
	if inv.nAttrs.Load() < v1MaxCachedSelectors {
		if v, loaded := inv.attrKeys.LoadOrStore(name, vals); loaded {
			return v.([]string)
		}
		inv.nAttrs.Add(1)
	}
	return vals
}

// SelectorCompiles reports why a stored selector cannot be evaluated,
// or nil.
func SelectorCompiles(expr string) error {
	e, ok := dselProgramCache.get(expr)
	if !ok {
		e = dselCompileProgram(expr)
		dselProgramCache.add(expr, e)
	}
	return e.err
}
