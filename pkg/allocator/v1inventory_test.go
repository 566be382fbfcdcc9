package allocator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Builders for the inventory tests (prefixed inv to stay clear of the
// package's other fixtures).

func invSeed(name, node, driver string, gen int64, common []resourceapi.AttributeGroup, insts ...resourceapi.ResourceInstance) *resourceapi.NodeResourceSlice {
	return &resourceapi.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen},
		Spec: resourceapi.NodeResourceSliceSpec{NodeName: node, DriverName: driver,
			NodeResourceModel: resourceapi.NodeResourceModel{Partitionable: &resourceapi.PartitionableResources{
				CommonAttributes: common, ResourceInstances: insts}}},
	}
}

func invLeaf(name string, attrs ...resourceapi.Attribute) resourceapi.ResourceInstance {
	return resourceapi.ResourceInstance{Name: name, Attributes: attrs}
}

func invUnhealthy(in resourceapi.ResourceInstance) resourceapi.ResourceInstance {
	in.Health = resourceapi.InstanceUnhealthy
	return in
}

func invParent(name string, groups ...resourceapi.ResourceInstanceGroup) resourceapi.ResourceInstance {
	return resourceapi.ResourceInstance{Name: name, Partitions: groups}
}

func invGroup(name string, insts ...resourceapi.ResourceInstance) resourceapi.ResourceInstanceGroup {
	return resourceapi.ResourceInstanceGroup{Name: name, ResourceInstances: insts}
}

func invQ(name, q string) resourceapi.Attribute {
	v := resource.MustParse(q)
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{Quantity: &v}}
}

func invS(name, s string) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{String: &s}}
}

func invV(name, s string) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{Version: &s}}
}

func invB(name string, b bool) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{Bool: &b}}
}

func invI(name string, i int64) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{Int: &i}}
}

func invIs(name string, is ...int64) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{IntSlice: &is}}
}

func invSs(name string, ss ...string) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{StringSlice: &ss}}
}

// invDeviceNames lists "pool/device=instance" for every device of pools.
func invDeviceNames(pools []V1Pool) []string {
	var out []string
	for _, p := range pools {
		for _, d := range p.Devices {
			out = append(out, p.Name+"/"+d.Name+"="+d.SeedInstance)
		}
	}
	return out
}

// invProblemsMatch checks that each problem contains the corresponding
// substring, and that there are exactly as many.
func invProblemsMatch(t *testing.T, got []InventoryProblem, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d problems %v, want %d %q", len(got), got, len(want), want)
	}
	for i := range want {
		if s := got[i].String(); !strings.Contains(s, want[i]) {
			t.Errorf("problem %d = %q, want it to contain %q", i, s, want[i])
		}
	}
}

const invDriver = "gpu.example.com"

func TestSeedDevicesNames(t *testing.T) {
	longName := "partitionable-gpu-1"
	tests := []struct {
		name     string
		insts    []resourceapi.ResourceInstance
		want     []string // pool/device=instance
		problems []string
	}{{
		name:  "flat leaves",
		insts: []resourceapi.ResourceInstance{invLeaf("gpu0"), invLeaf("gpu1")},
		want:  []string{"n1/gpu0=gpu0", "n1/gpu1=gpu1"},
	}, {
		name: "partitions, nested",
		insts: []resourceapi.ResourceInstance{invParent("gpu0",
			invGroup("whole", invLeaf("w")),
			invGroup("mig", invLeaf("a"), invParent("b", invGroup("half", invLeaf("h0"), invLeaf("h1")))))},
		want: []string{"n1/gpu0--whole--w=gpu0/whole/w", "n1/gpu0--mig--a=gpu0/mig/a",
			"n1/gpu0--mig--b--half--h0=gpu0/mig/b/half/h0", "n1/gpu0--mig--b--half--h1=gpu0/mig/b/half/h1"},
	}, {
		name: "a leaf literally named like another's projection: both left out",
		insts: []resourceapi.ResourceInstance{
			invParent("a", invGroup("g", invLeaf("b"), invLeaf("c"))),
			invLeaf("a--g--b"),
		},
		want: []string{"n1/a--g--c=a/g/c"},
		problems: []string{`instance a/g/b: device name "a--g--b" is also the name of instance a--g--b`,
			`instance a--g--b: device name "a--g--b" is also the name of instance a/g/b`},
	}, {
		name:  "an unhealthy leaf still owns its name",
		insts: []resourceapi.ResourceInstance{invUnhealthy(invLeaf("x--g--y")), invParent("x", invGroup("g", invLeaf("y")))},
		problems: []string{`instance x--g--y: device name "x--g--y" is also`,
			`instance x/g/y: device name "x--g--y" is also`},
	}, {
		name:     "upper case is not a DNS label",
		insts:    []resourceapi.ResourceInstance{invLeaf("GPU0"), invLeaf("gpu1")},
		want:     []string{"n1/gpu1=gpu1"},
		problems: []string{`instance GPU0: device name "GPU0" is not a DNS label`},
	}, {
		name:     "a dot is not a DNS label",
		insts:    []resourceapi.ResourceInstance{invLeaf("gpu.0")},
		problems: []string{`device name "gpu.0" is not a DNS label`},
	}, {
		// Seed 002's own card: its deepest leaf's name is 86 characters.
		name: "longer than 63",
		insts: []resourceapi.ResourceInstance{invParent(longName,
			invGroup("half-and-quarters", invParent("partitionable-second-half",
				invGroup("quarters", invLeaf("quarter-0")))),
			invGroup("full-gpu", invLeaf("gpu-1")))},
		want:     []string{"n1/partitionable-gpu-1--full-gpu--gpu-1=partitionable-gpu-1/full-gpu/gpu-1"},
		problems: []string{`device name "partitionable-gpu-1--half-and-quarters--partitionable-second-half--quarters--quarter-0" is not a DNS label (must be no more than 63 characters)`},
	}, {
		name: "unhealthy leaves and everything below an unhealthy instance are left out",
		insts: []resourceapi.ResourceInstance{invUnhealthy(invLeaf("gpu0")), invLeaf("gpu1"),
			invUnhealthy(invParent("gpu2", invGroup("g", invLeaf("a"))))},
		want: []string{"n1/gpu1=gpu1"},
	}, {
		name:     "a leaf the model finds defective is left out with the model's problem",
		insts:    []resourceapi.ResourceInstance{invLeaf("gpu0", invV("fw", "not-a-version")), invLeaf("gpu1")},
		want:     []string{"n1/gpu1=gpu1"},
		problems: []string{`instance gpu0: attribute "fw"`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools, problems := SeedDevices([]*resourceapi.NodeResourceSlice{invSeed("s1", "n1", invDriver, 1, nil, tt.insts...)})
			if len(pools) != 1 {
				t.Fatalf("got %d pools, want 1", len(pools))
			}
			if got := invDeviceNames(pools); !slices.Equal(got, tt.want) {
				t.Errorf("devices = %q, want %q", got, tt.want)
			}
			invProblemsMatch(t, problems, tt.problems)
		})
	}
}

func TestSeedDevicesAttributes(t *testing.T) {
	str := func(s string) *string { return &s }
	type attrs = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	type caps = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity
	many := make([]resourceapi.Attribute, 33)
	for i := range many {
		many[i] = invI(fmt.Sprintf("a%d", i), int64(i))
	}
	tests := []struct {
		name     string
		slice    *resourceapi.NodeResourceSlice
		attrs    attrs
		caps     caps
		gone     bool // the device is left out
		problems []string
	}{{
		name:  "quantity is a capacity",
		slice: invSeed("s", "n", invDriver, 1, nil, invLeaf("d", invQ("memory", "16Gi"))),
		caps:  caps{"memory": {Value: resource.MustParse("16Gi")}},
	}, {
		name:  "bool, int, string",
		slice: invSeed("s", "n", invDriver, 1, nil, invLeaf("d", invB("mig", true), invI("cores", 96), invS("model", "a100"))),
		attrs: attrs{"mig": {BoolValue: invPtr(true)}, "cores": {IntValue: invPtr(int64(96))}, "model": {StringValue: str("a100")}},
	}, {
		name: "versions are canonical semver",
		slice: invSeed("s", "n", invDriver, 1, nil, invLeaf("d",
			invV("fw", "v1.02"), invV("rt", " 12 "), invV("pre", "1.2.3-rc.1+b7"), invV("plain", "11.1.42"))),
		attrs: attrs{"fw": {VersionValue: str("1.2.0")}, "rt": {VersionValue: str("12.0.0")},
			"pre": {VersionValue: str("1.2.3-rc.1+b7")}, "plain": {VersionValue: str("11.1.42")}},
	}, {
		name:  "lists are left out, the device stays",
		slice: invSeed("s", "n", invDriver, 1, nil, invLeaf("d", invIs("ids", 1, 2), invSs("tags", "x"), invI("n", 1))),
		attrs: attrs{"n": {IntValue: invPtr(int64(1))}},
		problems: []string{"device d ids: intSlice: list attributes need DRAListTypeAttributes",
			"device d tags: stringSlice: list attributes need DRAListTypeAttributes"},
	}, {
		name: "names that are not v1 names are left out",
		slice: invSeed("s", "n", invDriver, 1, nil, invLeaf("d", invS("memory.example.com", "x"),
			invI("aVeryLongAttributeNameOf33Chars__", 1), invI("aVeryLongAttributeNameOf32Chars_", 2), invQ("mem.example.com", "1"))),
		attrs: attrs{"aVeryLongAttributeNameOf32Chars_": {IntValue: invPtr(int64(2))}},
		problems: []string{"mem.example.com: not a v1 attribute name",
			"aVeryLongAttributeNameOf33Chars__: not a v1 attribute name: must be a C identifier of at most 32",
			"memory.example.com: not a v1 attribute name"},
	}, {
		name:     "strings longer than 64 are left out",
		slice:    invSeed("s", "n", invDriver, 1, nil, invLeaf("d", invS("serial", strings.Repeat("x", 65)), invS("ok", strings.Repeat("y", 64)))),
		attrs:    attrs{"ok": {StringValue: str(strings.Repeat("y", 64))}},
		problems: []string{"serial: string of 65 bytes, v1 allows 64"},
	}, {
		name: "effective attributes: common groups, partition group, then the instance",
		slice: invSeed("s", "n", invDriver, 1, []resourceapi.AttributeGroup{
			{Name: "drivers", Attributes: []resourceapi.Attribute{invV("runtime", "11.1.42"), invQ("memory", "32Gi"), invS("kind", "card")}},
			{Name: "quarter", Attributes: []resourceapi.Attribute{invQ("memory", "8Gi"), invS("kind", "quarter")}},
		}, resourceapi.ResourceInstance{Name: "gpu", CommonAttributesRefs: []string{"drivers"}, Partitions: []resourceapi.ResourceInstanceGroup{{
			Name: "quarters", CommonAttributesRefs: []string{"quarter"},
			ResourceInstances: []resourceapi.ResourceInstance{invLeaf("d", invS("kind", "q0"))},
		}}}),
		attrs: attrs{"runtime": {VersionValue: str("11.1.42")}, "kind": {StringValue: str("q0")}},
		caps:  caps{"memory": {Value: resource.MustParse("8Gi")}},
	}, {
		name:     "more than 32 attributes and capacities: the device is left out",
		slice:    invSeed("s", "n", invDriver, 1, nil, invLeaf("d", many...)),
		gone:     true,
		problems: []string{"device d: has 33 attributes and capacities, v1 allows 32"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools, problems := SeedDevices([]*resourceapi.NodeResourceSlice{tt.slice})
			invProblemsMatch(t, problems, tt.problems)
			if len(pools) != 1 {
				t.Fatalf("got %d pools, want 1", len(pools))
			}
			var dev *PoolDevice
			for i := range pools[0].Devices {
				if strings.HasSuffix(pools[0].Devices[i].Name, "d") {
					dev = &pools[0].Devices[i]
				}
			}
			if tt.gone {
				if dev != nil {
					t.Fatalf("device %s is offered, want it left out", dev.Name)
				}
				return
			}
			if dev == nil {
				t.Fatalf("no device d in %v", invDeviceNames(pools))
			}
			if !reflect.DeepEqual(dev.Attributes, tt.attrs) {
				t.Errorf("attributes = %v, want %v", invFormatAttrs(dev.Attributes), invFormatAttrs(tt.attrs))
			}
			if len(dev.Capacity) != len(tt.caps) {
				t.Errorf("capacity = %v, want %v", dev.Capacity, tt.caps)
			}
			for n, c := range tt.caps {
				if got, ok := dev.Capacity[n]; !ok || got.Value.Cmp(c.Value) != 0 {
					t.Errorf("capacity %s = %v, want %v", n, got.Value.String(), c.Value.String())
				}
			}
		})
	}
}

func invPtr[T any](v T) *T { return &v }

func invFormatAttrs(m map[resourcev1.QualifiedName]resourcev1.DeviceAttribute) string {
	var parts []string
	for n, a := range m {
		v := "?"
		switch {
		case a.BoolValue != nil:
			v = fmt.Sprint(*a.BoolValue)
		case a.IntValue != nil:
			v = fmt.Sprint(*a.IntValue)
		case a.StringValue != nil:
			v = "s:" + *a.StringValue
		case a.VersionValue != nil:
			v = "v:" + *a.VersionValue
		}
		parts = append(parts, string(n)+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func TestSeedDevicesPools(t *testing.T) {
	pools, problems := SeedDevices([]*resourceapi.NodeResourceSlice{
		invSeed("n2-gpu", "n2", invDriver, 4, nil, invLeaf("g0")),
		invSeed("n1-gpu-b", "n1", invDriver, 3, nil, invLeaf("g1")),
		invSeed("n1-gpu-a", "n1", invDriver, 7, nil, invLeaf("g0"), invLeaf("g1")), // g1 first wins
		invSeed("n1-gpu-c", "n1", invDriver, 5, nil),
		invSeed("n1-nic", "n1", "nic.example.com", 2, nil, invLeaf("eth0")),
		nil,
	})
	type summary struct {
		Driver, Name, Node string
		Generation         int64
		FromSeed           bool
		Devices            string
	}
	var got []summary
	for _, p := range pools {
		var devs []string
		for _, d := range p.Devices {
			devs = append(devs, d.Name+"@"+d.Slice+"@"+d.NodeName)
		}
		got = append(got, summary{p.Driver, p.Name, p.Node, p.Generation, p.FromSeed, strings.Join(devs, ",")})
	}
	want := []summary{
		{invDriver, "n1", "n1", 7, true, "g0@n1-gpu-a@n1,g1@n1-gpu-a@n1"},
		{invDriver, "n2", "n2", 4, true, "g0@n2-gpu@n2"},
		{"nic.example.com", "n1", "n1", 2, true, "eth0@n1-nic@n1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pools = %+v\nwant    %+v", got, want)
	}
	invProblemsMatch(t, problems, []string{"slice n1-gpu-b instance g1: duplicate instance ID; the first wins"})
	for _, p := range pools {
		if !p.Usable() || p.Counters != nil {
			t.Errorf("pool %s/%s: usable %v, counters %v; want usable, no counters", p.Driver, p.Name, p.Usable(), p.Counters)
		}
		for _, d := range p.Devices {
			if !d.AvailableOn(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.Node}}) ||
				d.AvailableOn(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other"}}) {
				t.Errorf("device %s is not exactly on node %s", d.Name, p.Node)
			}
		}
	}
}

func TestValidateSeedDeviceNames(t *testing.T) {
	base := field.NewPath("spec", "partitionable", "resourceInstances")
	tests := []struct {
		name  string
		insts []resourceapi.ResourceInstance
		want  []string // type and field of each error
	}{{
		name:  "valid",
		insts: []resourceapi.ResourceInstance{invLeaf("gpu0"), invParent("gpu1", invGroup("mig", invLeaf("a"), invLeaf("b")))},
	}, {
		name:  "not a DNS label, at the leaf",
		insts: []resourceapi.ResourceInstance{invLeaf("gpu0"), invParent("gpu1", invGroup("mig", invLeaf("a"), invLeaf("B")))},
		want:  []string{"FieldValueInvalid " + base.Index(1).Child("partitions").Index(0).Child("resourceInstances").Index(1).Child("name").String()},
	}, {
		name:  "a partitioned instance's bad name is reported at each leaf below",
		insts: []resourceapi.ResourceInstance{invParent("Gpu", invGroup("g", invLeaf("a"), invLeaf("b")))},
		want: []string{"FieldValueInvalid " + base.Index(0).Child("partitions").Index(0).Child("resourceInstances").Index(0).Child("name").String(),
			"FieldValueInvalid " + base.Index(0).Child("partitions").Index(0).Child("resourceInstances").Index(1).Child("name").String()},
	}, {
		name:  "two leaves with one projected name: the later one",
		insts: []resourceapi.ResourceInstance{invParent("a", invGroup("g", invLeaf("b"))), invLeaf("a--g--b")},
		want:  []string{"FieldValueDuplicate " + base.Index(1).Child("name").String()},
	}, {
		name:  "repeated instance IDs are ValidateNodeResourceSlice's to report",
		insts: []resourceapi.ResourceInstance{invLeaf("a"), invLeaf("a"), invLeaf("")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateSeedDeviceNames(invSeed("s", "n", invDriver, 1, nil, tt.insts...))
			var got []string
			for _, e := range errs {
				got = append(got, string(e.Type)+" "+e.Field)
				if !strings.Contains(e.Error(), "resource.k8s.io/v1 device name") {
					t.Errorf("error %q does not explain the device name", e.Error())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors = %q, want %q", got, tt.want)
			}
		})
	}
	if errs := ValidateSeedDeviceNames(&resourceapi.NodeResourceSlice{}); errs != nil {
		t.Errorf("a slice without a model: %v", errs)
	}
}

func TestSeedLeavesConflict(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"gpu0", "gpu0", true},
		{"gpu0", "gpu1", false},
		{"gpu0/mig/a", "gpu0/mig/b", false},
		{"gpu0/mig/a", "gpu0/whole/w", true},
		{"gpu0/mig/a", "gpu1/whole/w", false},
		{"gpu0/mig/b/half/h0", "gpu0/mig/b/half/h1", false},
		{"gpu0/mig/b/half/h0", "gpu0/mig/b/quarter/q0", true},
		{"gpu0/mig/b/half/h0", "gpu0/mig/a", false},
		{"gpu0/mig/b/half/h0", "gpu0/whole/w", true},
		{"gpu0/m/a", "gpu0/mig/a", true},
	}
	for _, tt := range tests {
		if got := SeedLeavesConflict(tt.a, tt.b); got != tt.want {
			t.Errorf("SeedLeavesConflict(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := SeedLeavesConflict(tt.b, tt.a); got != tt.want {
			t.Errorf("SeedLeavesConflict(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

// v1 slices.

type invSliceOpt func(*resourcev1.ResourceSlice)

func invV1(name, pool string, gen, count int64, opts ...invSliceOpt) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: invDriver,
			Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count}},
	}
	for _, o := range opts {
		o(s)
	}
	if s.Spec.NodeName == nil && s.Spec.NodeSelector == nil && s.Spec.AllNodes == nil && s.Spec.PerDeviceNodeSelection == nil {
		s.Spec.NodeName = invPtr(pool)
	}
	return s
}

func invDevs(devs ...resourcev1.Device) invSliceOpt {
	return func(s *resourcev1.ResourceSlice) { s.Spec.Devices = append(s.Spec.Devices, devs...) }
}

func invDev(name string, consumes ...resourcev1.DeviceCounterConsumption) resourcev1.Device {
	return resourcev1.Device{Name: name, ConsumesCounters: consumes}
}

func invConsume(set string, counters ...string) resourcev1.DeviceCounterConsumption {
	c := resourcev1.DeviceCounterConsumption{CounterSet: set, Counters: map[string]resourcev1.Counter{}}
	for _, n := range counters {
		c.Counters[n] = resourcev1.Counter{Value: resource.MustParse("1")}
	}
	return c
}

// invCounters adds a counter set whose counters are given as name=value.
func invCounters(set string, counters ...string) invSliceOpt {
	return func(s *resourcev1.ResourceSlice) {
		cs := resourcev1.CounterSet{Name: set, Counters: map[string]resourcev1.Counter{}}
		for _, c := range counters {
			n, v, _ := strings.Cut(c, "=")
			cs.Counters[n] = resourcev1.Counter{Value: resource.MustParse(v)}
		}
		s.Spec.SharedCounters = append(s.Spec.SharedCounters, cs)
	}
}

func invAllNodes(s *resourcev1.ResourceSlice) { s.Spec.AllNodes = invPtr(true) }

func TestV1Pools(t *testing.T) {
	tests := []struct {
		name       string
		slices     []*resourcev1.ResourceSlice
		devices    string // "name@slice" of the one pool, comma-separated
		generation int64
		node       string
		incomplete string
		invalid    string
		counters   map[string]map[string]string
		problems   []string
	}{{
		name: "one complete pool over two slices",
		slices: []*resourcev1.ResourceSlice{
			invV1("s2", "n1", 1, 2, invDevs(invDev("c"))),
			invV1("s1", "n1", 1, 2, invDevs(invDev("a"), invDev("b"))),
		},
		devices: "a@s1,b@s1,c@s2", generation: 1, node: "n1",
	}, {
		name: "older generations are ignored",
		slices: []*resourcev1.ResourceSlice{
			invV1("old", "n1", 1, 1, invDevs(invDev("a"), invDev("gone"))),
			invV1("new", "n1", 2, 1, invDevs(invDev("a"), invDev("b"))),
			invV1("older", "n1", 0, 3, invDevs(invDev("x"))),
		},
		devices: "a@new,b@new", generation: 2, node: "n1",
	}, {
		name: "fewer slices than resourceSliceCount: incomplete",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "n1", 3, 2, invDevs(invDev("a"))),
			invV1("s0", "n1", 2, 1, invDevs(invDev("z"))),
		},
		devices: "a@s1", generation: 3, node: "n1", incomplete: "1 of 2 slices of generation 3 are published",
	}, {
		name: "more slices than resourceSliceCount: incomplete",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "n1", 1, 1, invDevs(invDev("a"))),
			invV1("s2", "n1", 1, 1, invDevs(invDev("b"))),
		},
		devices: "a@s1,b@s2", generation: 1, node: "n1", incomplete: "2 of 1 slices",
	}, {
		name: "slices disagree on the count: incomplete",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "n1", 1, 2, invDevs(invDev("a"))),
			invV1("s2", "n1", 1, 3, invDevs(invDev("b"))),
		},
		devices: "a@s1,b@s2", generation: 1, node: "n1", incomplete: "disagree on resourceSliceCount (2, 3)",
	}, {
		name: "a device name in two slices: invalid",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "n1", 1, 2, invDevs(invDev("a"))),
			invV1("s2", "n1", 1, 2, invDevs(invDev("a"))),
		},
		devices: "a@s1,a@s2", generation: 1, node: "n1", invalid: "duplicate device name a",
	}, {
		name: "shared counters are carried, per set",
		slices: []*resourcev1.ResourceSlice{
			invV1("counters", "n1", 1, 2, invCounters("gpu0", "memory=40Gi", "sm=98"), invCounters("gpu1", "memory=80Gi")),
			invV1("devices", "n1", 1, 2, invDevs(invDev("g0", invConsume("gpu0", "memory", "sm")), invDev("g1", invConsume("gpu1", "memory")))),
		},
		devices: "g0@devices,g1@devices", generation: 1, node: "n1",
		counters: map[string]map[string]string{"gpu0": {"memory": "40Gi", "sm": "98"}, "gpu1": {"memory": "80Gi"}},
	}, {
		name: "a consumed counter set that does not exist: invalid",
		slices: []*resourcev1.ResourceSlice{
			invV1("counters", "n1", 1, 2, invCounters("gpu0", "memory=40Gi")),
			invV1("devices", "n1", 1, 2, invDevs(invDev("g0", invConsume("gpu0", "memory")), invDev("g1", invConsume("gpu1", "memory")))),
		},
		devices: "g0@devices,g1@devices", generation: 1, node: "n1", invalid: "device g1: counter set gpu1 not found",
		counters: map[string]map[string]string{"gpu0": {"memory": "40Gi"}},
	}, {
		name: "a consumed counter its set lacks: invalid",
		slices: []*resourcev1.ResourceSlice{
			invV1("counters", "n1", 1, 2, invCounters("gpu0", "memory=40Gi")),
			invV1("devices", "n1", 1, 2, invDevs(invDev("g0", invConsume("gpu0", "memory", "sm")))),
		},
		devices: "g0@devices", generation: 1, node: "n1", invalid: "counter sm not found in counter set gpu0",
		counters: map[string]map[string]string{"gpu0": {"memory": "40Gi"}},
	}, {
		name: "a counter set defined twice: invalid",
		slices: []*resourcev1.ResourceSlice{
			invV1("c1", "n1", 1, 2, invCounters("gpu0", "memory=40Gi")),
			invV1("c2", "n1", 1, 2, invCounters("gpu0", "memory=80Gi")),
		},
		generation: 1, node: "n1", invalid: "duplicate counter set name gpu0",
		counters: map[string]map[string]string{"gpu0": {"memory": "40Gi"}},
	}, {
		name: "devices and counters in one slice: invalid",
		slices: []*resourcev1.ResourceSlice{
			invV1("s", "n1", 1, 1, invCounters("gpu0", "memory=40Gi"), invDevs(invDev("g0", invConsume("gpu0", "memory")))),
		},
		devices: "g0@s", generation: 1, node: "n1", invalid: "slice s has both devices and sharedCounters",
		counters: map[string]map[string]string{"gpu0": {"memory": "40Gi"}},
	}, {
		name: "compatibility groups: the slice is ignored, the pool incomplete",
		slices: []*resourcev1.ResourceSlice{
			invV1("counters", "n1", 1, 2, invCounters("gpu0", "memory=40Gi")),
			invV1("devices", "n1", 1, 2, invDevs(invDev("g0", resourcev1.DeviceCounterConsumption{CounterSet: "gpu0",
				Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("1Gi")}}, CompatibilityGroups: []string{"mig"}}))),
		},
		generation: 1, node: "n1", incomplete: "slices devices use compatibilityGroups",
		counters: map[string]map[string]string{"gpu0": {"memory": "40Gi"}},
	}, {
		name: "slices on different nodes: no node",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "p", 1, 2, invDevs(invDev("a")), func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = invPtr("n1") }),
			invV1("s2", "p", 1, 2, invDevs(invDev("b")), func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = invPtr("n2") }),
		},
		devices: "a@s1,b@s2", generation: 1,
	}, {
		name: "network-attached pool: no node",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "fabric", 1, 1, invAllNodes, invDevs(invDev("a"))),
		},
		devices: "a@s1", generation: 1,
	}, {
		name: "a slice without node selection",
		slices: []*resourcev1.ResourceSlice{
			invV1("s1", "p", 1, 1, func(s *resourcev1.ResourceSlice) { s.Spec.AllNodes = invPtr(false) }, invDevs(invDev("a"))),
		},
		devices: "a@s1", generation: 1,
		problems: []string{"slice s1: sets none of nodeName, nodeSelector, allNodes and perDeviceNodeSelection"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools, problems := V1Pools(tt.slices)
			invProblemsMatch(t, problems, tt.problems)
			if len(pools) != 1 {
				t.Fatalf("got %d pools, want 1", len(pools))
			}
			p := pools[0]
			var devs []string
			for _, d := range p.Devices {
				devs = append(devs, d.Name+"@"+d.Slice)
			}
			if got := strings.Join(devs, ","); got != tt.devices {
				t.Errorf("devices = %q, want %q", got, tt.devices)
			}
			if p.Generation != tt.generation || p.Node != tt.node || p.FromSeed {
				t.Errorf("generation %d node %q fromSeed %v, want %d %q false", p.Generation, p.Node, p.FromSeed, tt.generation, tt.node)
			}
			if !invContains(p.Incomplete, tt.incomplete) {
				t.Errorf("incomplete = %q, want %q", p.Incomplete, tt.incomplete)
			}
			if !invContains(p.Invalid, tt.invalid) {
				t.Errorf("invalid = %q, want %q", p.Invalid, tt.invalid)
			}
			if p.Usable() != (tt.incomplete == "" && tt.invalid == "") {
				t.Errorf("usable = %v", p.Usable())
			}
			got := map[string]map[string]string{}
			for set, cs := range p.Counters {
				got[set] = map[string]string{}
				for n, q := range cs {
					got[set][n] = q.String()
				}
			}
			if tt.counters == nil {
				tt.counters = map[string]map[string]string{}
			}
			if !reflect.DeepEqual(got, tt.counters) {
				t.Errorf("counters = %v, want %v", got, tt.counters)
			}
		})
	}
}

// invContains is true when both are empty or got contains a non-empty want.
func invContains(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.Contains(got, want)
}

func TestV1PoolsGrouping(t *testing.T) {
	other := invV1("z", "n1", 5, 1, invDevs(invDev("a")))
	other.Spec.Driver = "nic.example.com"
	pools, _ := V1Pools([]*resourcev1.ResourceSlice{
		invV1("b", "n2", 1, 1, invDevs(invDev("a"))),
		other,
		nil,
		invV1("a", "n1", 1, 1, invDevs(invDev("a"))),
	})
	var got []string
	for _, p := range pools {
		got = append(got, fmt.Sprintf("%s/%s@%d", p.Driver, p.Name, p.Generation))
	}
	want := []string{invDriver + "/n1@1", invDriver + "/n2@1", "nic.example.com/n1@5"}
	if !slices.Equal(got, want) {
		t.Errorf("pools = %q, want %q", got, want)
	}
}

func TestV1PoolDeviceAvailableOn(t *testing.T) {
	node := func(name string, labels ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			n.Labels[k] = v
		}
		return n
	}
	zoneA := &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
		MatchExpressions: []k8scorev1.NodeSelectorRequirement{{Key: "zone", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"a"}}},
	}}}
	byName := &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
		MatchFields: []k8scorev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpNotIn, Values: []string{"n1"}}},
	}}}
	badField := &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
		MatchFields: []k8scorev1.NodeSelectorRequirement{{Key: "spec.podCIDR", Operator: k8scorev1.NodeSelectorOpNotIn, Values: []string{"x"}}},
	}}}
	perDevice := func(s *resourcev1.ResourceSlice) { s.Spec.PerDeviceNodeSelection = invPtr(true) }
	selector := func(sel *k8scorev1.NodeSelector) invSliceOpt {
		return func(s *resourcev1.ResourceSlice) { s.Spec.NodeSelector = sel }
	}
	devOn := func(name string, set func(*resourcev1.Device)) resourcev1.Device {
		d := invDev(name)
		set(&d)
		return d
	}
	pools, problems := V1Pools([]*resourcev1.ResourceSlice{
		invV1("local", "n1", 1, 1, invDevs(invDev("local"))),
		invV1("zone", "zone", 1, 1, selector(zoneA), invDevs(invDev("zoned"))),
		invV1("notn1", "notn1", 1, 1, selector(byName), invDevs(invDev("notn1"))),
		invV1("everywhere", "everywhere", 1, 1, invAllNodes, invDevs(invDev("everywhere"))),
		invV1("bad", "bad", 1, 1, selector(badField), invDevs(invDev("bad"))),
		invV1("mixed", "mixed", 1, 1, perDevice, invDevs(
			devOn("d-n2", func(d *resourcev1.Device) { d.NodeName = invPtr("n2") }),
			devOn("d-zone", func(d *resourcev1.Device) { d.NodeSelector = zoneA }),
			devOn("d-all", func(d *resourcev1.Device) { d.AllNodes = invPtr(true) }),
			invDev("d-none"),
		)),
	})
	invProblemsMatch(t, problems, []string{`slice bad spec.nodeSelector: matchFields key "spec.podCIDR" is not supported`,
		"slice mixed device d-none: the slice has perDeviceNodeSelection, but the device sets none"})
	devices := map[string]*PoolDevice{}
	for i := range pools {
		for j := range pools[i].Devices {
			devices[pools[i].Devices[j].Name] = &pools[i].Devices[j]
		}
	}
	tests := []struct {
		device string
		node   *corev1.Node
		want   bool
	}{
		{"local", node("n1"), true},
		{"local", node("n2"), false},
		{"local", nil, false},
		{"zoned", node("n1", "zone=a"), true},
		{"zoned", node("n1", "zone=b"), false},
		{"zoned", node("n1"), false},
		{"notn1", node("n1"), false},
		{"notn1", node("n2"), true},
		{"everywhere", node("n9"), true},
		{"everywhere", nil, true},
		{"bad", node("n1"), false},
		{"d-n2", node("n2"), true},
		{"d-n2", node("n1"), false},
		{"d-zone", node("n3", "zone=a"), true},
		{"d-zone", node("n3", "zone=c"), false},
		{"d-all", node("n3"), true},
		{"d-none", node("n3"), false},
	}
	for _, tt := range tests {
		d := devices[tt.device]
		if d == nil {
			t.Fatalf("no device %s", tt.device)
		}
		name := "<nil>"
		if tt.node != nil {
			name = tt.node.Name + fmt.Sprint(tt.node.Labels)
		}
		if got := d.AvailableOn(tt.node); got != tt.want {
			t.Errorf("%s.AvailableOn(%s) = %v, want %v", tt.device, name, got, tt.want)
		}
		// A device built by hand (no converted selector) answers alike.
		bare := PoolDevice{Name: d.Name, NodeName: d.NodeName, NodeSelector: d.NodeSelector, AllNodes: d.AllNodes}
		if got := bare.AvailableOn(tt.node); got != tt.want {
			t.Errorf("hand-built %s.AvailableOn(%s) = %v, want %v", tt.device, name, got, tt.want)
		}
	}
	if d := devices["zoned"]; d.NodeSelector != zoneA {
		t.Errorf("the published node selector is not kept")
	}

	// Which pools reach a node, for allocation mode All.
	reach := func(n *corev1.Node) []string {
		var out []string
		for i := range pools {
			if pools[i].ReachesNode(n) {
				out = append(out, pools[i].Name)
			}
		}
		return out
	}
	if got, want := reach(node("n2", "zone=a")), []string{"everywhere", "mixed", "notn1", "zone"}; !slices.Equal(got, want) {
		t.Errorf("pools reaching n2 = %q, want %q", got, want)
	}
	if got, want := reach(node("n1")), []string{"everywhere", "mixed", "n1"}; !slices.Equal(got, want) {
		t.Errorf("pools reaching n1 = %q, want %q", got, want)
	}
	counterOnly := V1Pool{Node: "n1", Counters: map[string]map[string]resource.Quantity{"s": {}}}
	if counterOnly.ReachesNode(node("n2")) || !counterOnly.ReachesNode(node("n1")) {
		t.Errorf("a node-local pool with shared counters reaches another node, or not its own")
	}
}

// BenchmarkV1Pools groups 1,000 node-local slices of 8 devices (four
// attributes, one capacity each) into pools, as the scheduler will when
// slices change.
func BenchmarkV1Pools(b *testing.B) {
	const nSlices, nDevices = 1000, 8
	var in []*resourcev1.ResourceSlice
	for i := range nSlices {
		node := fmt.Sprintf("node-%04d", i)
		s := invV1(node+"-gpu", node, 1, 1)
		for j := range nDevices {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d", j),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"model": {StringValue: invPtr("a100")}, "index": {IntValue: invPtr(int64(j))},
					"driverVersion": {VersionValue: invPtr("1.2.3")}, "mig": {BoolValue: invPtr(false)},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}},
			})
		}
		in = append(in, s)
	}
	b.ReportAllocs()
	for b.Loop() {
		pools, problems := V1Pools(in)
		if len(pools) != nSlices || len(problems) != 0 {
			b.Fatalf("%d pools, %d problems", len(pools), len(problems))
		}
	}
}
