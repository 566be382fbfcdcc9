package allocator

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzSelector: no selector makes compilation or evaluation panic, and no
// evaluation exceeds the cost limit.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{
		`versions["runtimeVersion"] >= "v12.0.0" && quantities["memory"] >= "8Gi"`,
		`"8Gi" <= quantities["memory"] || bools["ecc"]`,
		`stringslices["features"].exists(f, f.startsWith("m"))`,
		`intslices["numa"].map(x, x * 2).all(y, y < 10)`,
		`semver("1.2") < versions["firmware"] && quantity("1") > quantities["x"]`,
		`strings["model"].matches("^A[0-9]+$")`,
		`size(strings) > 0 ? ints["cores"] / 0 > 1 : false`,
		`[1, 2, 3].all(x, [1, 2, 3].all(y, [1, 2, 3].all(z, x + y + z > 0)))`,
		`(((((true)))))`,
		`quantities["memory"] >= "1e3" && quantities["memory"] < "-5m"`,
	} {
		f.Add(s)
	}
	vars := testVars(f)
	empty, err := newAttrVars(attrSet{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		sel, err := compileSelector(expr)
		if err != nil {
			return
		}
		if sel.estimate > SelectorCostLimit {
			t.Fatalf("compiled with estimate %d over the limit", sel.estimate)
		}
		for _, v := range []*attrVars{vars, empty} {
			_ = sel.eval(v)
			_, det, err := sel.prog.Eval(v)
			if err == nil && det != nil && det.ActualCost() != nil && *det.ActualCost() > SelectorCostLimit {
				t.Fatalf("cost %d over the limit", *det.ActualCost())
			}
		}
		for _, c := range sel.conjuncts() {
			_ = c.eval(vars)
		}
	})
}

// fuzzReader turns fuzz bytes into choices; exhausted input reads as 0.
type fuzzReader struct{ data []byte }

func (r *fuzzReader) next(n int) int {
	if len(r.data) == 0 || n <= 0 {
		return 0
	}
	v := int(r.data[0]) % n
	r.data = r.data[1:]
	return v
}

var fuzzNames = []string{"a", "b", "a", "c/d", "", "gpu-0", "q"}

func (r *fuzzReader) attribute() resourceapi.Attribute {
	a := resourceapi.Attribute{Name: []string{"memory", "model", "v", "n"}[r.next(4)]}
	switch r.next(6) {
	case 0:
		a.Quantity = ptr(resource.MustParse([]string{"8Gi", "16Gi", "1"}[r.next(3)]))
	case 1:
		a.String = ptr("x")
	case 2:
		a.Version = ptr([]string{"1.2", "v12", "bad"}[r.next(3)])
	case 3:
		a.Int = ptr(int64(r.next(3)))
	case 4: // two values: malformed
		a.Int, a.Bool = ptr(int64(1)), ptr(true)
	}
	return a
}

func (r *fuzzReader) instance(depth int) resourceapi.ResourceInstance {
	in := resourceapi.ResourceInstance{Name: fuzzNames[r.next(len(fuzzNames))]}
	for range r.next(3) {
		in.Attributes = append(in.Attributes, r.attribute())
	}
	if r.next(4) == 0 {
		in.CommonAttributesRefs = []string{[]string{"g", "missing"}[r.next(2)]}
	}
	if r.next(8) == 0 {
		in.Health = resourceapi.InstanceUnhealthy
	}
	if depth < 4 {
		for range r.next(3) {
			g := resourceapi.ResourceInstanceGroup{Name: fuzzNames[r.next(len(fuzzNames))]}
			for range r.next(4) {
				g.ResourceInstances = append(g.ResourceInstances, r.instance(depth+1))
			}
			in.Partitions = append(in.Partitions, g)
		}
	}
	return in
}

// FuzzModel: no slice, allocation state or request makes the allocator
// panic, and every allocation it returns is valid.
// node reads a node "n" of driver "d" from r: odd names, malformed
// attributes, and one claim holding allocated IDs (stale ones too, that
// lock or use inner instances), and those IDs.
func (r *fuzzReader) node() (st *NodeState, existing []string) {
	p := &resourceapi.PartitionableResources{CommonAttributes: []resourceapi.AttributeGroup{{Name: "g", Attributes: []resourceapi.Attribute{r.attribute()}}}}
	for range 1 + r.next(4) {
		p.ResourceInstances = append(p.ResourceInstances, r.instance(0))
	}
	model := NewModel("n", []*resourceapi.NodeResourceSlice{makeSlice("n", "d", p)})
	for range r.next(4) {
		id := fuzzNames[r.next(len(fuzzNames))]
		for range r.next(5) {
			id += "/" + fuzzNames[r.next(len(fuzzNames))]
		}
		existing = append(existing, id)
	}
	return NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "n", "d", existing...)}), existing
}

func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{5, 2, 1, 0, 2, 3, 1, 1, 0, 2, 2, 1, 0, 0, 3, 1, 2})
	f.Add([]byte("partitionable-gpu-1/half-and-quarters/partitionable-second-half"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data: data}
		st, existing := r.node()
		var sels []string
		for range 1 + r.next(4) {
			sels = append(sels, diffSelectors[r.next(len(diffSelectors))])
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, err := Allocate(ctx, Prepare(nil, []Claim{makeClaim("c", "d", sels...)}), st)
		if err != nil || !res.Fits {
			return
		}
		var ids []string
		for _, h := range res.Allocations[0].ResourceHandles {
			for _, in := range h.StructuredData.Partitionable.Instances {
				ids = append(ids, in.ID)
			}
		}
		if len(ids) != len(sels) {
			t.Fatalf("%d instances for %d requests", len(ids), len(sels))
		}
		if idLocks(existing) == nil {
			if err := idLocks(append(existing, ids...)); err != nil {
				t.Fatalf("invalid allocation %v over %v: %v", ids, existing, err)
			}
		}
		dm := st.model.drivers["d"]
		for i, id := range ids {
			x := dm.byID[id]
			sel, _ := compileSelector(sels[i])
			if dm.insts[x].leaf < 0 || !dm.insts[x].ok || sel.eval(dm.insts[x].vars) != outcomeTrue {
				t.Fatalf("%s does not satisfy %s: %s", id, sels[i], fmt.Sprint(dm.insts[x]))
			}
		}
	})
}
