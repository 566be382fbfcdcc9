package dradiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The generator: one random, bounded case from a seed. Everything it
// produces is a valid API object (TestGeneratorValid checks that with
// allot's API validation), so that a disagreement is about allocation and
// never about input the API server would have refused.

const (
	drvGPU  = "gpu.example.com"
	drvNIC  = "nic.example.com"
	domTopo = "topo.example.com"
	ns      = "dradiff"
)

// Case is one generated input: the cluster (nodes, classes, slices, devices
// already allocated) and one pod's claims. It is what a failure prints, as
// YAML, and what the shrinker reduces.
type Case struct {
	Seed  uint64 `json:"seed"`
	Index int    `json:"index"`
	// Nodes are upstream's core/v1 nodes; only name and labels matter.
	Nodes   []*k8scorev1.Node           `json:"nodes"`
	Classes []*resourcev1.DeviceClass   `json:"classes"`
	Slices  []*resourcev1.ResourceSlice `json:"slices"`
	Holes   []Hole                      `json:"holes,omitempty"`
	// Shares are shares of devices with allowMultipleAllocations already
	// allocated to other claims.
	Shares []Share                     `json:"shares,omitempty"`
	Claims []*resourcev1.ResourceClaim `json:"claims"`
}

// Share is a share of a device already allocated to some other claim,
// with what it consumes.
type Share struct {
	Hole     `json:",inline"`
	Consumed map[resourcev1.QualifiedName]resource.Quantity `json:"consumed"`
}

// Hole is a device already allocated to some other claim.
type Hole struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
}

func (h Hole) String() string { return h.Driver + "/" + h.Pool + "/" + h.Device }

// needsIncubating reports whether the case needs DRAConsumableCapacity:
// some claim has a distinctAttribute constraint or capacity requests, or
// some device allows multiple allocations. Upstream's stable allocator
// refuses the first two and does not know the third: such cases run with
// ConsumableCapacity on, which selects the incubating variant.
func (c *Case) needsIncubating() bool {
	if len(c.Shares) > 0 {
		return true
	}
	for _, cl := range c.Claims {
		for _, con := range cl.Spec.Devices.Constraints {
			if con.DistinctAttribute != nil {
				return true
			}
		}
		for _, r := range cl.Spec.Devices.Requests {
			if r.Exactly != nil && r.Exactly.Capacity != nil {
				return true
			}
			for _, s := range r.FirstAvailable {
				if s.Capacity != nil {
					return true
				}
			}
		}
	}
	for _, s := range c.Slices {
		for _, d := range s.Spec.Devices {
			if ptr.Deref(d.AllowMultipleAllocations, false) {
				return true
			}
		}
	}
	return false
}

func (c *Case) class(name string) *resourcev1.DeviceClass {
	for _, cl := range c.Classes {
		if cl.Name == name {
			return cl
		}
	}
	return nil
}

// Clone deep-copies the case (the shrinker edits copies).
func (c *Case) Clone() *Case {
	out := &Case{Seed: c.Seed, Index: c.Index, Holes: slices.Clone(c.Holes)}
	for _, sh := range c.Shares {
		cp := Share{Hole: sh.Hole, Consumed: map[resourcev1.QualifiedName]resource.Quantity{}}
		for n, q := range sh.Consumed {
			cp.Consumed[n] = q.DeepCopy()
		}
		out.Shares = append(out.Shares, cp)
	}
	for _, n := range c.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	for _, cl := range c.Classes {
		out.Classes = append(out.Classes, cl.DeepCopy())
	}
	for _, s := range c.Slices {
		out.Slices = append(out.Slices, s.DeepCopy())
	}
	for _, cl := range c.Claims {
		out.Claims = append(out.Claims, cl.DeepCopy())
	}
	return out
}

// YAML renders the case for a reproduction (nodes by name and labels
// only).
func (c *Case) YAML() string {
	type node struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	view := struct {
		Seed    uint64                      `json:"seed"`
		Index   int                         `json:"index"`
		Nodes   []node                      `json:"nodes"`
		Classes []*resourcev1.DeviceClass   `json:"classes"`
		Slices  []*resourcev1.ResourceSlice `json:"slices"`
		Holes   []Hole                      `json:"holes,omitempty"`
		Shares  []Share                     `json:"shares,omitempty"`
		Claims  []*resourcev1.ResourceClaim `json:"claims"`
	}{c.Seed, c.Index, nil, c.Classes, c.Slices, c.Holes, c.Shares, c.Claims}
	for _, n := range c.Nodes {
		view.Nodes = append(view.Nodes, node{n.Name, n.Labels})
	}
	b, err := yaml.Marshal(view)
	if err != nil {
		return fmt.Sprintf("<yaml: %v>", err)
	}
	return string(b)
}

// gen holds the state of generating one case.
type gen struct {
	r      *rand.Rand
	c      *Case
	slices map[string]int // slice name → uses, for unique names
	taints bool           // some device has a taint
	// shareable: the case has devices with allowMultipleAllocations
	// (NICs with a consumable capacity); capacity: its requests may ask
	// for capacity.
	shareable, capacity bool
	// attrs seen, for selectors that can match something
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }
func (g *gen) pick(n int) int        { return g.r.IntN(n) }

func pickOne[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// caseRand is the random source of case i of a run: independent of the
// other cases, so one case can be regenerated from the seed and its index.
func caseRand(seed uint64, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(index)*0x9e3779b97f4a7c15+1))
}

// genCase generates case index of the run with the seed.
func genCase(seed uint64, index int) *Case {
	g := &gen{r: caseRand(seed, index), c: &Case{Seed: seed, Index: index}, slices: map[string]int{}}
	g.nodes()
	g.classes()
	g.shareable = g.chance(0.3)
	g.capacity = g.chance(0.3)
	nics := 0.5
	if g.shareable {
		// Shareable NICs need NIC requests to show: a NIC class, NIC
		// pools on most nodes.
		nics = 0.9
		if g.c.class("nic") == nil {
			g.c.Classes = append(g.c.Classes, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"},
				Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: celDriver(drvNIC)}}}}})
		}
	}
	for _, n := range g.c.Nodes {
		if g.chance(0.85) {
			g.localPool(n.Name, drvGPU)
		}
		if g.chance(nics) {
			g.localPool(n.Name, drvNIC)
		}
	}
	if g.chance(0.35) {
		g.networkPool(pickOne(g, drvGPU, drvNIC, drvGPU))
	}
	if g.chance(0.4) {
		g.holes()
	}
	if g.shareable && g.chance(0.5) {
		g.shares()
	}
	nClaims := 1 + g.weighted(0.55, 0.3, 0.15)
	for i := range nClaims {
		g.claim(i)
	}
	return g.c
}

// weighted returns i with probability w[i] (the weights sum to 1).
func (g *gen) weighted(w ...float64) int {
	x := g.r.Float64()
	for i, p := range w {
		if x < p {
			return i
		}
		x -= p
	}
	return len(w) - 1
}

func (g *gen) nodes() {
	n := 1 + g.pick(3)
	for i := range n {
		zone := "a"
		if i > 0 && g.chance(0.5) {
			zone = "b"
		}
		g.c.Nodes = append(g.c.Nodes, &k8scorev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("node-%d", i),
			UID:    types.UID(fmt.Sprintf("uid-node-%d", i)),
			Labels: map[string]string{"zone": zone, "rack": pickOne(g, "r1", "r2")},
		}})
	}
}

func celDriver(d string) string { return fmt.Sprintf("device.driver == %q", d) }

func (g *gen) classes() {
	type tmpl struct {
		name string
		sel  []string
	}
	all := []tmpl{
		{"gpu", []string{celDriver(drvGPU)}},
		{"nic", []string{celDriver(drvNIC)}},
		{"gpu-big", []string{celDriver(drvGPU), capAtLeast(drvGPU, "memory", "16Gi")}},
		{"any", nil},
		{"gpu-ecc", []string{celDriver(drvGPU), attrIs(drvGPU, "ecc", "true")}},
	}
	// gpu is always there; 0-2 more.
	chosen := []tmpl{all[0]}
	rest := all[1:]
	g.r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	chosen = append(chosen, rest[:g.pick(3)]...)
	for _, t := range chosen {
		c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: t.name}}
		for _, s := range t.sel {
			c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
		}
		g.c.Classes = append(g.c.Classes, c)
	}
}

// Selector snippets. Every attribute or capacity read is guarded by "in":
// a missing key is a CEL runtime error, which upstream's allocator reports
// for the first device it meets in its (map-ordered) walk, so an unguarded
// read would make the outcome depend on the walk order.
func attrIn(dom, id string) string {
	return fmt.Sprintf("%q in device.attributes[%q]", id, dom)
}

func attrIs(dom, id, celValue string) string {
	return fmt.Sprintf("%s && device.attributes[%q].%s == %s", attrIn(dom, id), dom, id, celValue)
}

func capAtLeast(dom, id, q string) string {
	return fmt.Sprintf("%q in device.capacity[%q] && device.capacity[%q].%s.compareTo(quantity(%q)) >= 0", id, dom, dom, id, q)
}

func capBelow(dom, id, q string) string {
	return fmt.Sprintf("%q in device.capacity[%q] && device.capacity[%q].%s.isLessThan(quantity(%q))", id, dom, dom, id, q)
}

func (g *gen) requestSelector(driver string) string {
	switch driver {
	case drvNIC:
		return pickOne(g,
			fmt.Sprintf("%s && device.attributes[%q].speed >= 25", attrIn(drvNIC, "speed"), drvNIC),
			attrIs(drvNIC, "rdma", "true"),
			attrIs(domTopo, "numa", fmt.Sprint(g.pick(2))),
		)
	default:
		return pickOne(g,
			attrIs(drvGPU, "model", `"h100"`),
			attrIs(drvGPU, "model", `"a100"`),
			fmt.Sprintf("%s && device.attributes[%q].index >= 1", attrIn(drvGPU, "index"), drvGPU),
			attrIs(drvGPU, "ecc", "false"),
			fmt.Sprintf(`%s && device.attributes[%q].fw.isGreaterThan(semver("1.1.0"))`, attrIn(drvGPU, "fw"), drvGPU),
			capAtLeast(drvGPU, "memory", pickOne(g, "16Gi", "32Gi")),
			capBelow(drvGPU, "memory", pickOne(g, "17Gi", "33Gi")),
			attrIs(domTopo, "numa", fmt.Sprint(g.pick(2))),
			// A selector that can fail at run time only when guarded badly
			// is deliberately absent; see attrIn.
		)
	}
}

func (g *gen) sliceName(base string) string {
	g.slices[base]++
	return fmt.Sprintf("%s-%d", base, g.slices[base])
}

func (g *gen) gpuDevice(name string, index int) resourcev1.Device {
	d := resourcev1.Device{
		Name:       name,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			"memory": {Value: resource.MustParse(pickOne(g, "8Gi", "16Gi", "32Gi", "40Gi"))},
		},
	}
	d.Attributes["index"] = resourcev1.DeviceAttribute{IntValue: ptr.To(int64(index))}
	if g.chance(0.9) {
		d.Attributes["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To(pickOne(g, "a100", "h100"))}
	}
	if g.chance(0.9) {
		d.Attributes["ecc"] = resourcev1.DeviceAttribute{BoolValue: ptr.To(g.chance(0.5))}
	}
	if g.chance(0.9) {
		d.Attributes["fw"] = resourcev1.DeviceAttribute{VersionValue: ptr.To(pickOne(g, "1.0.0", "1.2.0", "2.0.0"))}
	}
	d.Attributes[domTopo+"/numa"] = resourcev1.DeviceAttribute{IntValue: ptr.To(int64(g.pick(2)))}
	g.maybeTaint(&d)
	return d
}

func (g *gen) nicDevice(name string) resourcev1.Device {
	d := resourcev1.Device{
		Name: name,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"speed": {IntValue: ptr.To(int64(pickOne(g, 10, 25, 100)))},
		},
	}
	if g.chance(0.8) {
		d.Attributes["rdma"] = resourcev1.DeviceAttribute{BoolValue: ptr.To(g.chance(0.5))}
	}
	if g.chance(0.85) {
		d.Attributes[domTopo+"/numa"] = resourcev1.DeviceAttribute{IntValue: ptr.To(int64(g.pick(2)))}
	}
	if g.shareable && g.chance(0.6) {
		g.shareableNIC(&d)
	}
	g.maybeTaint(&d)
	return d
}

func (g *gen) maybeTaint(d *resourcev1.Device) {
	if !g.chance(0.12) {
		return
	}
	effect := resourcev1.DeviceTaintEffectNoSchedule
	if g.chance(0.2) {
		effect = resourcev1.DeviceTaintEffectNone
	}
	d.Taints = append(d.Taints, resourcev1.DeviceTaint{Key: "maint", Value: pickOne(g, "true", "soon"), Effect: effect})
	g.taints = true
}

func (g *gen) devices(driver string, n int) []resourcev1.Device {
	var out []resourcev1.Device
	for i := range n {
		if driver == drvGPU {
			out = append(out, g.gpuDevice(fmt.Sprintf("gpu-%d", i), i))
		} else {
			out = append(out, g.nicDevice(fmt.Sprintf("nic-%d", i)))
		}
	}
	return out
}

func short(driver string) string { return strings.SplitN(driver, ".", 2)[0] }

// localPool adds a pool of the driver local to the node: one or two
// device slices, sometimes shared counters in a slice of their own, and
// sometimes an incomplete pool, an older generation, or a duplicate device
// name (an invalid pool).
func (g *gen) localPool(node, driver string) {
	pool := node
	base := node + "-" + short(driver)
	var devs []resourcev1.Device
	var counterSlice *resourcev1.ResourceSlice
	if driver == drvGPU && g.chance(0.25) {
		devs, counterSlice = g.partitionable(node)
	} else {
		devs = g.devices(driver, 2+g.pick(4))
	}
	generation := int64(1)
	if g.chance(0.1) {
		generation = 2
	}
	mk := func(ds []resourcev1.Device) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: g.sliceName(base)},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   driver,
				Pool:     resourcev1.ResourcePool{Name: pool, Generation: generation},
				NodeName: ptr.To(node),
				Devices:  ds,
			},
		}
	}
	var ss []*resourcev1.ResourceSlice
	if len(devs) >= 2 && g.chance(0.25) {
		cut := 1 + g.pick(len(devs)-1)
		ss = append(ss, mk(devs[:cut]), mk(devs[cut:]))
		if g.chance(0.15) {
			// Invalid: a device name repeats across the pool's slices.
			dup := ss[0].Spec.Devices[0].DeepCopy()
			ss[1].Spec.Devices = append(ss[1].Spec.Devices, *dup)
		}
	} else {
		ss = append(ss, mk(devs))
	}
	if counterSlice != nil {
		counterSlice.ObjectMeta.Name = g.sliceName(base + "-counters")
		counterSlice.Spec.Pool.Generation = generation
		ss = append(ss, counterSlice)
	}
	count := int64(len(ss))
	if g.chance(0.08) {
		count++ // incomplete: a slice is still missing
	}
	for _, s := range ss {
		s.Spec.Pool.ResourceSliceCount = count
	}
	g.c.Slices = append(g.c.Slices, ss...)
	if generation == 2 {
		// An older generation, which must be ignored: other devices, and a
		// different slice count.
		old := mk(g.devices(driver, 1+g.pick(3)))
		old.Spec.Pool.Generation = 1
		old.Spec.Pool.ResourceSliceCount = 1
		for i := range old.Spec.Devices {
			old.Spec.Devices[i].Name = "old-" + old.Spec.Devices[i].Name
		}
		g.c.Slices = append(g.c.Slices, old)
	}
}

// partitionable makes one or two physical GPUs offered as overlapping
// partitions (whole, halves, quarters) that consume a counter set per GPU,
// and the slice with the counter sets.
func (g *gen) partitionable(node string) ([]resourcev1.Device, *resourcev1.ResourceSlice) {
	nGPU := 1 + g.pick(2)
	counterSlice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
		Driver:   drvGPU,
		Pool:     resourcev1.ResourcePool{Name: node},
		NodeName: ptr.To(node),
	}}
	var devs []resourcev1.Device
	for p := range nGPU {
		set := fmt.Sprintf("gpu-%d-counters", p)
		counterSlice.Spec.SharedCounters = append(counterSlice.Spec.SharedCounters, resourcev1.CounterSet{
			Name: set,
			Counters: map[string]resourcev1.Counter{
				"memory": {Value: resource.MustParse("40Gi")},
				"sms":    {Value: resource.MustParse("8")},
			},
		})
		parts := []struct {
			name     string
			mem, sms string
		}{{"full", "40Gi", "8"}, {"half-0", "20Gi", "4"}, {"half-1", "20Gi", "4"}, {"quarter-0", "10Gi", "2"}}
		if g.chance(0.5) {
			parts = append(parts, struct {
				name     string
				mem, sms string
			}{"quarter-1", "10Gi", "2"})
		}
		for _, pt := range parts {
			d := g.gpuDevice(fmt.Sprintf("gpu-%d-%s", p, pt.name), p)
			d.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse(pt.mem)}
			d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{
				CounterSet: set,
				Counters: map[string]resourcev1.Counter{
					"memory": {Value: resource.MustParse(pt.mem)},
					"sms":    {Value: resource.MustParse(pt.sms)},
				},
			}}
			devs = append(devs, d)
		}
	}
	return devs, counterSlice
}

// networkPool adds a pool not local to one node: all nodes, a node
// selector on the zone label, or per-device node selection.
func (g *gen) networkPool(driver string) {
	devs := g.devices(driver, 1+g.pick(3))
	for i := range devs {
		devs[i].Name = "fabric-" + devs[i].Name
	}
	spec := resourcev1.ResourceSliceSpec{
		Driver:  driver,
		Pool:    resourcev1.ResourcePool{Name: "fabric", Generation: 1, ResourceSliceCount: 1},
		Devices: devs,
	}
	zoneSel := func(zones ...string) *k8scorev1.NodeSelector {
		return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
			MatchExpressions: []k8scorev1.NodeSelectorRequirement{{Key: "zone", Operator: k8scorev1.NodeSelectorOpIn, Values: zones}},
		}}}
	}
	switch g.weighted(0.4, 0.4, 0.2) {
	case 0:
		spec.AllNodes = ptr.To(true)
	case 1:
		spec.NodeSelector = zoneSel(pickOne(g, "a", "b"))
	default:
		spec.PerDeviceNodeSelection = ptr.To(true)
		for i := range spec.Devices {
			switch g.pick(3) {
			case 0:
				spec.Devices[i].AllNodes = ptr.To(true)
			case 1:
				spec.Devices[i].NodeName = ptr.To(g.c.Nodes[g.pick(len(g.c.Nodes))].Name)
			default:
				spec.Devices[i].NodeSelector = zoneSel(pickOne(g, "a", "b"))
			}
		}
	}
	g.c.Slices = append(g.c.Slices, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: g.sliceName("fabric-" + short(driver))},
		Spec:       spec,
	})
}

// holes marks 1-3 current devices as allocated to other claims.
func (g *gen) holes() {
	var all []Hole
	maxGen := poolGenerations(g.c.Slices)
	for _, s := range g.c.Slices {
		if s.Spec.Pool.Generation != maxGen[poolKey{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		for _, d := range s.Spec.Devices {
			h := Hole{s.Spec.Driver, s.Spec.Pool.Name, d.Name}
			if !slices.Contains(all, h) {
				all = append(all, h)
			}
		}
	}
	if len(all) == 0 {
		return
	}
	g.r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// Devices already allocated never overdraw a counter set together.
	want := 1 + g.pick(2)
	pools := checkerPools(g.c)
	used := map[poolKey]map[string]map[string]resource.Quantity{}
	for _, h := range all {
		if len(g.c.Holes) == want {
			break
		}
		k := poolKey{h.Driver, h.Pool}
		p := pools[k]
		d := p.devices[h.Device]
		ok := true
		if used[k] == nil {
			used[k] = map[string]map[string]resource.Quantity{}
		}
		next := map[string]map[string]resource.Quantity{}
		for _, cc := range d.dev.ConsumesCounters {
			for n, v := range cc.Counters {
				q := used[k][cc.CounterSet][n]
				if next[cc.CounterSet] != nil {
					if nq, ok := next[cc.CounterSet][n]; ok {
						q = nq
					}
				}
				q = q.DeepCopy()
				q.Add(v.Value)
				if q.Cmp(p.counters[cc.CounterSet][n]) > 0 {
					ok = false
				}
				if next[cc.CounterSet] == nil {
					next[cc.CounterSet] = map[string]resource.Quantity{}
				}
				next[cc.CounterSet][n] = q
			}
		}
		if !ok {
			continue
		}
		for set, cs := range next {
			if used[k][set] == nil {
				used[k][set] = map[string]resource.Quantity{}
			}
			for n, q := range cs {
				used[k][set][n] = q
			}
		}
		g.c.Holes = append(g.c.Holes, h)
	}
}

type poolKey struct{ driver, pool string }

func poolGenerations(ss []*resourcev1.ResourceSlice) map[poolKey]int64 {
	m := map[poolKey]int64{}
	for _, s := range ss {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		m[k] = max(m[k], s.Spec.Pool.Generation)
	}
	return m
}

func (g *gen) classDriver(class string) string {
	switch class {
	case "nic":
		return drvNIC
	case "any":
		return pickOne(g, drvGPU, drvNIC)
	}
	return drvGPU
}

func (g *gen) tolerations() []resourcev1.DeviceToleration {
	if !g.taints || !g.chance(0.3) {
		return nil
	}
	return []resourcev1.DeviceToleration{pickOne(g,
		resourcev1.DeviceToleration{Key: "maint", Operator: resourcev1.DeviceTolerationOpExists},
		resourcev1.DeviceToleration{Key: "maint", Operator: resourcev1.DeviceTolerationOpEqual, Value: "true"},
		resourcev1.DeviceToleration{Operator: resourcev1.DeviceTolerationOpExists},
		resourcev1.DeviceToleration{Key: "maint", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule},
	)}
}

func (g *gen) selectors(class string, n int) []resourcev1.DeviceSelector {
	var out []resourcev1.DeviceSelector
	for range n {
		out = append(out, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: g.requestSelector(g.classDriver(class))}})
	}
	return out
}

func (g *gen) count() int64 { return int64(1 + g.weighted(0.6, 0.3, 0.1)) }

func (g *gen) claim(i int) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns,
		Name:      fmt.Sprintf("claim-%d", i),
		UID:       types.UID(fmt.Sprintf("uid-claim-%d", i)),
	}}
	nReq := 1 + g.weighted(0.5, 0.35, 0.15)
	var names []string // request names that constraints may list
	for j := range nReq {
		req := resourcev1.DeviceRequest{Name: fmt.Sprintf("r%d", j)}
		names = append(names, req.Name)
		className := g.className()
		switch {
		case g.chance(0.22):
			nSub := 2 + g.pick(2)
			for k := range nSub {
				cn := g.className()
				sub := resourcev1.DeviceSubRequest{
					Name:            fmt.Sprintf("s%d", k),
					DeviceClassName: cn,
					Selectors:       g.selectors(cn, g.weighted(0.6, 0.4)),
					AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
					Tolerations:     g.tolerations(),
					Capacity:        g.capacityRequest(cn),
				}
				if g.chance(0.05) {
					sub.AllocationMode = resourcev1.DeviceAllocationModeAll
				} else {
					// Earlier alternatives tend to ask for more.
					sub.Count = max(1, int64(nSub-k)-int64(g.pick(2)))
				}
				req.FirstAvailable = append(req.FirstAvailable, sub)
				if g.chance(0.2) {
					names = append(names, req.Name+"/"+sub.Name)
				}
			}
		default:
			ex := &resourcev1.ExactDeviceRequest{
				DeviceClassName: className,
				Selectors:       g.selectors(className, g.weighted(0.55, 0.35, 0.1)),
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Tolerations:     g.tolerations(),
				Capacity:        g.capacityRequest(className),
			}
			if g.chance(0.1) {
				ex.AllocationMode = resourcev1.DeviceAllocationModeAll
			} else {
				ex.Count = g.count()
			}
			if g.chance(0.07) {
				ex.AdminAccess = ptr.To(true)
			}
			req.Exactly = ex
		}
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, req)
	}
	if g.chance(0.3) {
		nCon := 1 + g.weighted(0.8, 0.2)
		for range nCon {
			var con resourcev1.DeviceConstraint
			if !g.chance(0.4) {
				// A subset of the requests (and sub-requests).
				for _, n := range names {
					if g.chance(0.6) {
						con.Requests = append(con.Requests, n)
					}
				}
				if len(con.Requests) == 0 {
					con.Requests = []string{names[0]}
				}
				// A request and one of its own sub-requests may not both be listed.
				con.Requests = dropShadowed(con.Requests)
			}
			// Mostly an attribute that the devices of the first listed
			// request's class have.
			driver := pickOne(g, drvGPU, drvNIC)
			if !g.chance(0.1) {
				driver = drvGPU
				first := names[0]
				if len(con.Requests) > 0 {
					first = con.Requests[0]
				}
				if cls := requestClass(claim, first); cls == "nic" {
					driver = drvNIC
				}
			}
			if g.chance(0.3) {
				attrs := []string{drvGPU + "/index", domTopo + "/numa", drvGPU + "/model"}
				if driver == drvNIC {
					attrs = []string{drvNIC + "/speed", domTopo + "/numa"}
				}
				con.DistinctAttribute = ptr.To(resourcev1.FullyQualifiedName(pickOne(g, attrs...)))
			} else {
				attrs := []string{drvGPU + "/model", domTopo + "/numa", drvGPU + "/fw", drvGPU + "/ecc"}
				if driver == drvNIC {
					attrs = []string{drvNIC + "/speed", domTopo + "/numa", drvNIC + "/rdma"}
				}
				con.MatchAttribute = ptr.To(resourcev1.FullyQualifiedName(pickOne(g, attrs...)))
			}
			claim.Spec.Devices.Constraints = append(claim.Spec.Devices.Constraints, con)
		}
	}
	g.c.Claims = append(g.c.Claims, claim)
}

// className picks a class for a request, GPU classes more often.
func (g *gen) className() string {
	if g.shareable && g.chance(0.4) {
		return "nic"
	}
	if g.chance(0.5) {
		for _, c := range g.c.Classes {
			if c.Name == "gpu" {
				return c.Name
			}
		}
	}
	return g.c.Classes[g.pick(len(g.c.Classes))].Name
}

// requestClass is the class of the named request (or "r/s" sub-request;
// for a bare firstAvailable request, its first alternative's).
func requestClass(claim *resourcev1.ResourceClaim, name string) string {
	base, sub, _ := strings.Cut(name, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != base {
			continue
		}
		if r.Exactly != nil {
			return r.Exactly.DeviceClassName
		}
		for _, s := range r.FirstAvailable {
			if sub == "" || s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}

// dropShadowed removes "r/s" entries whose request "r" is listed too.
func dropShadowed(names []string) []string {
	return slices.DeleteFunc(names, func(n string) bool {
		base, _, ok := strings.Cut(n, "/")
		return ok && slices.Contains(names, base)
	})
}

// shareableNIC makes a NIC shareable (allowMultipleAllocations) with a
// consumable capacity and one of the request policies: none, validValues,
// a validRange with a step (and sometimes a max), or a fractional range
// (DRAFractionalCapacityRange).
func (g *gen) shareableNIC(d *resourcev1.Device) {
	q := resource.MustParse
	pq := func(s string) *resource.Quantity { v := q(s); return &v }
	d.AllowMultipleAllocations = ptr.To(true)
	d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
	switch g.pick(5) {
	case 0:
		d.Capacity["bandwidth"] = resourcev1.DeviceCapacity{Value: q(pickOne(g, "10G", "100G"))}
	case 1:
		d.Capacity["bandwidth"] = resourcev1.DeviceCapacity{Value: q("100G"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
			Default: pq("10G"), ValidValues: []resource.Quantity{q("10G"), q("25G"), q("50G")}}}
	case 2:
		r := &resourcev1.CapacityRequestPolicyRange{Min: pq("10G"), Step: pq("10G")}
		if g.chance(0.5) {
			r.Max = pq("60G")
		}
		d.Capacity["bandwidth"] = resourcev1.DeviceCapacity{Value: q("100G"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: pq("20G"), ValidRange: r}}
	case 3:
		d.Capacity["cores"] = resourcev1.DeviceCapacity{Value: q("4"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
			Default: pq("500m"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: pq("500m"), Max: pq("2"), Step: pq("250m")}}}
	default:
		d.Capacity["bandwidth"] = resourcev1.DeviceCapacity{Value: q("40G"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: pq("5G")}}
		d.Capacity["queues"] = resourcev1.DeviceCapacity{Value: q("8")}
	}
}

// capacityRequest is a request's capacity.requests, sometimes, when the
// case asks for capacity: bandwidth or cores of NICs, memory of GPUs, a
// capacity no device has.
func (g *gen) capacityRequest(class string) *resourcev1.CapacityRequirements {
	if !g.capacity || !g.chance(0.5) {
		return nil
	}
	reqs := map[resourcev1.QualifiedName]resource.Quantity{}
	switch drv := g.classDriver(class); {
	case g.chance(0.05):
		reqs["ports"] = resource.MustParse("1")
	case drv == drvNIC && g.chance(0.3):
		reqs["cores"] = resource.MustParse(pickOne(g, "300m", "600m", "1", "1500m", "2100m"))
	case drv == drvNIC:
		reqs["bandwidth"] = resource.MustParse(pickOne(g, "1G", "5G", "10G", "15G", "25G", "30G", "45G", "60G", "200G"))
		if g.chance(0.2) {
			reqs["queues"] = resource.MustParse(pickOne(g, "1", "4", "9"))
		}
	default:
		reqs["memory"] = resource.MustParse(pickOne(g, "8Gi", "16Gi", "20Gi", "64Gi"))
	}
	return &resourcev1.CapacityRequirements{Requests: reqs}
}

// shares allocates 1-3 shares of shareable devices to other claims, each
// consuming its capacities' defaults (or a quarter of a capacity without
// one), never more than a device has.
func (g *gen) shares() {
	maxGen := poolGenerations(g.c.Slices)
	var cands []Share
	for _, s := range g.c.Slices {
		if s.Spec.Pool.Generation != maxGen[poolKey{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		for _, d := range s.Spec.Devices {
			if !ptr.Deref(d.AllowMultipleAllocations, false) || slices.Contains(g.c.Holes, Hole{s.Spec.Driver, s.Spec.Pool.Name, d.Name}) {
				continue
			}
			sh := Share{Hole: Hole{s.Spec.Driver, s.Spec.Pool.Name, d.Name}, Consumed: map[resourcev1.QualifiedName]resource.Quantity{}}
			for n, c := range d.Capacity {
				if c.RequestPolicy != nil && c.RequestPolicy.Default != nil {
					sh.Consumed[n] = c.RequestPolicy.Default.DeepCopy()
				} else {
					sh.Consumed[n] = *resource.NewMilliQuantity(c.Value.MilliValue()/4, c.Value.Format)
				}
			}
			cands = append(cands, sh)
		}
	}
	if len(cands) == 0 {
		return
	}
	for range 1 + g.pick(3) {
		g.c.Shares = append(g.c.Shares, cands[g.pick(len(cands))])
	}
}
