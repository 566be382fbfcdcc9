package validation

import (
	"testing"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
)

type parts = resourcev1alpha2.PartitionableResources

func TestValidateNodeResourceSlice(t *testing.T) {
	const inst0 = "spec.partitionable.resourceInstances[0]"
	addAttr := func(a ...resourcev1alpha2.Attribute) func(*parts) {
		return func(p *parts) { p.ResourceInstances[0].Attributes = append(p.ResourceInstances[0].Attributes, a...) }
	}
	tree := func(groups ...resourcev1alpha2.ResourceInstanceGroup) func(*parts) {
		return func(p *parts) { p.ResourceInstances[0].Partitions = groups }
	}
	for name, tc := range map[string]struct {
		slice *resourcev1alpha2.NodeResourceSlice
		want  []string
	}{
		"valid":            {slice: makeSlice("s").obj()},
		"no node":          {slice: makeSlice("s").spec(func(s *resourcev1alpha2.NodeResourceSliceSpec) { s.NodeName = "" }).obj(), want: []string{"spec.nodeName: Required"}},
		"no driver":        {slice: makeSlice("s").spec(func(s *resourcev1alpha2.NodeResourceSliceSpec) { s.DriverName = "" }).obj(), want: []string{"spec.driverName: Required"}},
		"driver not a dns": {slice: makeSlice("s").spec(func(s *resourcev1alpha2.NodeResourceSliceSpec) { s.DriverName = "Cards" }).obj(), want: []string{"spec.driverName"}},
		"no model":         {slice: makeSlice("s").spec(func(s *resourcev1alpha2.NodeResourceSliceSpec) { s.Partitionable = nil }).obj(), want: []string{"spec: must specify one of: `partitionable`"}},
		"group name bad":   {slice: makeSlice("s").with(func(p *parts) { p.CommonAttributes[0].Name = "GPU" }).obj(), want: []string{"spec.partitionable.commonAttributes[0].name", inst0 + ".commonAttributesRefs[0]: must be the name of an entry in spec.partitionable.commonAttributes"}},
		"group name twice": {slice: makeSlice("s").with(func(p *parts) { p.CommonAttributes = append(p.CommonAttributes, p.CommonAttributes[0]) }).obj(), want: []string{"spec.partitionable.commonAttributes[1].name: Duplicate"}},
		"unknown ref":      {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].CommonAttributesRefs = []string{"nope"} }).obj(), want: []string{inst0 + ".commonAttributesRefs[0]: must be the name of an entry"}},
		"ref twice":        {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].CommonAttributesRefs = []string{"gpu", "gpu"} }).obj(), want: []string{inst0 + ".commonAttributesRefs[1]: Duplicate"}},
		"instance twice":   {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances = append(p.ResourceInstances, p.ResourceInstances[0]) }).obj(), want: []string{"spec.partitionable.resourceInstances[1].name: Duplicate"}},
		"instance no name": {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].Name = "" }).obj(), want: []string{inst0 + ".name: Required"}},
		"instance with /":  {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].Name = "gpu/0" }).obj(), want: []string{inst0 + ".name"}},
		"health":           {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].Health = resourcev1alpha2.InstanceUnhealthy }).obj()},
		"health bad":       {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].Health = "Sick" }).obj(), want: []string{inst0 + ".health"}},
		"attr identifier":  {slice: makeSlice("s").with(addAttr(strAttr("UUID", "x"), strAttr("driverVersion", "1"), strAttr("memory.example.com", "y"))).obj()},
		"attr name bad":    {slice: makeSlice("s").with(addAttr(strAttr("product name", "x"))).obj(), want: []string{inst0 + ".attributes[0].name: C identifier"}},
		"attr name empty":  {slice: makeSlice("s").with(addAttr(strAttr("", "x"))).obj(), want: []string{inst0 + ".attributes[0].name: Required"}},
		"attr name twice":  {slice: makeSlice("s").with(addAttr(strAttr("a", "x"), strAttr("a", "y"))).obj(), want: []string{inst0 + ".attributes[1].name: Duplicate"}},
		"group attr twice": {slice: makeSlice("s").with(func(p *parts) {
			p.CommonAttributes[0].Attributes = append(p.CommonAttributes[0].Attributes, strAttr("type", "x"))
		}).obj(), want: []string{"spec.partitionable.commonAttributes[0].attributes[1].name: Duplicate"}},
		"attr no value":    {slice: makeSlice("s").with(addAttr(resourcev1alpha2.Attribute{Name: "a"})).obj(), want: []string{inst0 + ".attributes[0]: must specify one of: `quantity`, `bool`, `int`, `intSlice`, `string`, `stringSlice`, `version`"}},
		"attr two values":  {slice: makeSlice("s").with(addAttr(twoValues())).obj(), want: []string{inst0 + ".attributes[0]: found: `quantity`, `string`"}},
		"version tolerant": {slice: makeSlice("s").with(addAttr(versionAttr("a", " v1.2 "), versionAttr("b", "01.02.03"), versionAttr("c", "11.1.42"))).obj()},
		"version bad":      {slice: makeSlice("s").with(addAttr(versionAttr("a", "one.two"))).obj(), want: []string{inst0 + ".attributes[0].version: must be a semantic version"}},
		// Seed 002: ".k8s.io" names are Kubernetes'; "myk8s.io" is not one.
		"attr reserved": {slice: makeSlice("s").with(addAttr(strAttr("memory", "x"), strAttr("topology.k8s.io", "y"))).obj(),
			want: []string{inst0 + `.attributes[1].name: Invalid value: "topology.k8s.io": attribute names ending in .k8s.io are reserved for standardization by Kubernetes`}},
		"attr reserved domain": {slice: makeSlice("s").with(addAttr(strAttr("k8s.io", "y"))).obj(), want: []string{inst0 + ".attributes[0].name: reserved"}},
		"attr k8s.io-like":     {slice: makeSlice("s").with(addAttr(strAttr("myk8s.io", "x"), strAttr("k8s.io.example.com", "y"), strAttr("k8s_io", "z"))).obj()},
		"group attr reserved": {slice: makeSlice("s").with(func(p *parts) {
			p.CommonAttributes[0].Attributes = append(p.CommonAttributes[0].Attributes, strAttr("gpu.k8s.io", "x"))
		}).obj(), want: []string{"spec.partitionable.commonAttributes[0].attributes[1].name: reserved"}},
		"nested attr reserved": {
			slice: makeSlice("s").with(tree(group("a", resourcev1alpha2.ResourceInstance{Name: "x", Attributes: []resourcev1alpha2.Attribute{strAttr("numa.k8s.io", "0")}}))).obj(),
			want:  []string{inst0 + ".partitions[0].resourceInstances[0].attributes[0].name: reserved"},
		},
		"partitions": {slice: makeSlice("s").with(tree(group("halves", instance("h0"), instance("h1")), group("whole", instance("w")))).obj()},
		"same names in different groups": {
			slice: makeSlice("s").with(tree(group("a", instance("x")), group("b", instance("x")))).obj(),
		},
		"partition twice": {
			slice: makeSlice("s").with(tree(group("a", instance("x")), group("a", instance("y")))).obj(),
			want:  []string{inst0 + ".partitions[1].name: Duplicate"},
		},
		"sibling instances twice": {
			slice: makeSlice("s").with(tree(group("a", instance("x"), instance("x")))).obj(),
			want:  []string{inst0 + ".partitions[0].resourceInstances[1].name: Duplicate"},
		},
		"partition unknown ref": {
			slice: makeSlice("s").with(tree(group("a", instance("x")))).with(func(p *parts) { p.ResourceInstances[0].Partitions[0].CommonAttributesRefs = []string{"nope"} }).obj(),
			want:  []string{inst0 + ".partitions[0].commonAttributesRefs[0]"},
		},
		"nested unknown ref": {
			slice: makeSlice("s").with(tree(group("a", resourcev1alpha2.ResourceInstance{Name: "x", CommonAttributesRefs: []string{"nope"}}))).obj(),
			want:  []string{inst0 + ".partitions[0].resourceInstances[0].commonAttributesRefs[0]"},
		},
		"depth 8":       {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances = []resourcev1alpha2.ResourceInstance{deep(8)} }).obj()},
		"depth 9":       {slice: makeSlice("s").with(func(p *parts) { p.ResourceInstances = []resourcev1alpha2.ResourceInstance{deep(9)} }).obj(), want: []string{deepPath(8) + ".partitions: at most 8 levels"}},
		"4096 in total": {slice: makeSlice("s").with(wide(4094)).obj()},
		"4097 in total": {slice: makeSlice("s").with(wide(4095)).obj(), want: []string{"spec.partitionable.resourceInstances[1].partitions[0].resourceInstances[4094]: at most 4096 instances"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateNodeResourceSlice(tc.slice), tc.want...) })
	}
}

func twoValues() resourcev1alpha2.Attribute {
	a := strAttr("a", "x")
	q := resource.MustParse("1")
	a.Quantity = &q
	return a
}

// deep is a chain of instances n levels deep.
func deep(n int) resourcev1alpha2.ResourceInstance {
	if n == 1 {
		return instance("leaf")
	}
	return instance("i", group("g", deep(n-1)))
}

func deepPath(levels int) string {
	p := "spec.partitionable.resourceInstances[0]"
	for i := 1; i < levels; i++ {
		p += ".partitions[0].resourceInstances[0]"
	}
	return p
}

// wide adds a second root instance with n instances in one partition: n+2
// instances in total.
func wide(n int) func(*parts) {
	return func(p *parts) {
		var list []resourcev1alpha2.ResourceInstance
		for _, name := range names("i", n) {
			list = append(list, instance(name))
		}
		p.ResourceInstances = append(p.ResourceInstances, instance("big", group("all", list...)))
	}
}

func TestValidateNodeResourceSliceUpdate(t *testing.T) {
	old := makeSlice("s").obj()
	expectErrs(t, ValidateNodeResourceSliceUpdate(makeSlice("s").with(func(p *parts) { p.ResourceInstances[0].Health = "Unhealthy" }).obj(), old))
	moved := makeSlice("s").spec(func(s *resourcev1alpha2.NodeResourceSliceSpec) {
		s.NodeName, s.DriverName = "worker-2", "other.example.com"
	}).obj()
	expectErrs(t, ValidateNodeResourceSliceUpdate(moved, old), "spec.nodeName: field is immutable", "spec.driverName: field is immutable")
}

// TestNodeResourceSliceUpdateReservedAttributes: a slice stored before
// seed 002's reservation was enforced stays writable with the reserved
// names it already publishes, wherever in the slice they move; a reserved
// name it did not publish is refused.
func TestNodeResourceSliceUpdateReservedAttributes(t *testing.T) {
	stored := makeSlice("s").with(func(p *parts) {
		p.ResourceInstances[0].Attributes = []resourcev1alpha2.Attribute{strAttr("topology.k8s.io", "a")}
		p.ResourceInstances[0].Partitions = []resourcev1alpha2.ResourceInstanceGroup{group("g", resourcev1alpha2.ResourceInstance{
			Name: "x", Attributes: []resourcev1alpha2.Attribute{strAttr("numa.k8s.io", "0")}})}
	}).obj()
	expectErrs(t, ValidateNodeResourceSlice(stored), "spec.partitionable.resourceInstances[0].attributes[0].name: reserved",
		"spec.partitionable.resourceInstances[0].partitions[0].resourceInstances[0].attributes[0].name: reserved")

	relabeled := stored.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	expectErrs(t, ValidateNodeResourceSliceUpdate(relabeled, stored))
	moved := makeSlice("s").with(func(p *parts) {
		p.CommonAttributes[0].Attributes = append(p.CommonAttributes[0].Attributes, strAttr("numa.k8s.io", "1"), strAttr("topology.k8s.io", "b"))
	}).obj()
	expectErrs(t, ValidateNodeResourceSliceUpdate(moved, stored))
	expectErrs(t, ValidateNodeResourceSliceUpdate(makeSlice("s").obj(), stored))
	added := makeSlice("s").with(func(p *parts) {
		p.ResourceInstances[0].Attributes = []resourcev1alpha2.Attribute{strAttr("topology.k8s.io", "a"), strAttr("pcie.k8s.io", "c")}
	}).obj()
	expectErrs(t, ValidateNodeResourceSliceUpdate(added, stored), "spec.partitionable.resourceInstances[0].attributes[1].name: reserved")
	expectErrs(t, ValidateNodeResourceSliceUpdate(added, makeSlice("s").obj()),
		"spec.partitionable.resourceInstances[0].attributes[0].name: reserved", "spec.partitionable.resourceInstances[0].attributes[1].name: reserved")
}
