package allocator_test

// Scenario commands for the seed API (v1alpha2): allocate-seed, model,
// validate-seed-names, seed-conflict, compile-seed.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"allot.dev/allot/pkg/allocator/engine"

	"github.com/cockroachdb/datadriven"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// seedSlices are the world's NodeResourceSlices.
func (w *world) seedSlices() []*resourceapi.NodeResourceSlice {
	return all[*resourceapi.NodeResourceSlice](w)
}

// seedState is the node's seed state: the seed view of one node of the
// one device-use state (State.SeedNodeState) of the world's slices with
// every allocated v1alpha2 and v1 claim. state=derived derives that state
// from an empty one instead: WithChanges adding those claims and the ones
// deallocate released, then removing the released ones.
// (TestSeedNodeStateMatchesClaims checks the view against a NodeState
// counting the claims themselves.)
func (w *world) seedState(d *datadriven.TestData, nodeName string) *allocator.NodeState {
	model := allocator.NewModel(nodeName, w.seedSlices())
	inv := allocator.NewInventory(all[*resourcev1.ResourceSlice](w), w.seedSlices())
	node := w.node(nodeName)
	v1, seed := w.allocatedV1(), w.allocatedSeed()
	var st *allocator.State
	if stringArg(d, "state", "") == "derived" {
		st = allocator.NewState(inv, nil, nil).
			WithChanges(nil, append(slices.Clip(v1), w.released...), nil, append(slices.Clip(seed), w.releasedSeed...)).
			WithChanges(w.released, nil, w.releasedSeed, nil)
	} else {
		st = allocator.NewState(inv, v1, seed)
	}
	return st.SeedNodeState(model, node, nil)
}

// cmdAllocateSeed: allocate-seed node=NAME claims=(a, b) [state=derived] [commit]
//
// Adds the input's objects, if any, to the world. Resolves the pod's v1alpha2 claims against the world's classes and
// parameters (Catalog.Resolve), prepares and allocates them on the node.
// Prints whether they fit, the score and per claim and driver the
// instances, or the reasons. commit writes the allocations into the
// claims.
func (w *world) cmdAllocateSeed(t *testing.T, d *datadriven.TestData) string {
	w.cmdObjects(t, d)
	cat := allocator.NewCatalog(&allocator.Snapshot{
		Classes:         all[*resourceapi.ResourceClass](w),
		ClaimParameters: all[*resourceapi.ResourceClaimParameters](w),
		ClassParameters: all[*resourceapi.ResourceClassParameters](w),
	})
	var b strings.Builder
	var claims []allocator.Claim
	for _, key := range claimKeys(t, d) {
		c := w.seedClaim(t, d, key)
		resolved, missing := cat.Resolve(c)
		for _, m := range missing {
			fmt.Fprintf(&b, "missing: %+v\n", m)
		}
		claims = append(claims, resolved)
	}
	if b.Len() > 0 {
		return b.String()
	}
	nodeName := stringArg(d, "node", "node-a")
	req := allocator.Prepare(scenarioPod(), claims)
	res, err := allocator.Allocate(context.Background(), req, w.seedState(d, nodeName))
	if err != nil {
		return "error: " + err.Error()
	}
	if !res.Fits {
		writeReasons(&b, req.Unresolvable(), res.Reasons)
		return b.String()
	}
	fmt.Fprintf(&b, "fits, score %d (capacity %d of %d left)\n", res.Score, res.CapacityAfter, res.CapacityBefore)
	for i, a := range res.Allocations {
		c := claims[i].Claim
		if a == nil {
			fmt.Fprintf(&b, "%s/%s: allocated already\n", c.Namespace, c.Name)
			continue
		}
		var handles []string
		for _, h := range a.ResourceHandles {
			var ids []string
			if h.StructuredData != nil && h.StructuredData.Partitionable != nil {
				for _, in := range h.StructuredData.Partitionable.Instances {
					ids = append(ids, in.ID)
				}
			}
			handles = append(handles, h.DriverName+": "+strings.Join(ids, " "))
		}
		if handles == nil {
			handles = []string{"no instances"}
		}
		fmt.Fprintf(&b, "%s/%s: %s\n", c.Namespace, c.Name, strings.Join(handles, "; "))
		if d.HasArg("commit") {
			c = c.DeepCopy()
			c.Status.Allocation = a.DeepCopy()
			w.objs = putObject(w.objs, object{key: objectKey("ResourceClaim.v1alpha2", c.Namespace, c.Name), obj: c})
		}
	}
	return b.String()
}

func (w *world) seedClaim(t *testing.T, d *datadriven.TestData, key string) *resourceapi.ResourceClaim {
	for _, c := range all[*resourceapi.ResourceClaim](w) {
		if c.Namespace+"/"+c.Name == key {
			return c
		}
	}
	d.Fatalf(t, "no v1alpha2 ResourceClaim %s", key)
	return nil
}

// cmdModel: model node=NAME: the node's Model of the world's
// NodeResourceSlices: per driver its instances (unusable ones marked), the
// problems, and the capacity with the world's allocated claims.
func (w *world) cmdModel(t *testing.T, d *datadriven.TestData) string {
	nodeName := stringArg(d, "node", "node-a")
	st := w.seedState(d, nodeName)
	m := st.Model()
	var b strings.Builder
	for _, driver := range m.Drivers() {
		ids, usable := m.Instances(driver)
		fmt.Fprintf(&b, "driver %s:\n", driver)
		for i, id := range ids {
			if usable[i] {
				fmt.Fprintf(&b, "  %s\n", id)
			} else {
				fmt.Fprintf(&b, "  %s (unusable)\n", id)
			}
		}
	}
	for _, p := range m.Problems() {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	fmt.Fprintf(&b, "capacity %d\n", st.Capacity())
	return b.String()
}

// cmdValidateSeedNames: ValidateSeedDeviceNames of each NodeResourceSlice.
func (w *world) cmdValidateSeedNames(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	for _, s := range w.seedSlices() {
		errs := allocator.ValidateSeedDeviceNames(s)
		if len(errs) == 0 {
			fmt.Fprintf(&b, "%s: ok\n", s.Name)
		}
		for _, e := range errs {
			fmt.Fprintf(&b, "%s: %s\n", s.Name, e.Error())
		}
	}
	return b.String()
}

// cmdSeedConflict: input lines "A B" of two seed instance IDs; prints
// whether SeedLeavesConflict, which must not depend on the order.
func (w *world) cmdSeedConflict(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	for _, line := range strings.Split(d.Input, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			d.Fatalf(t, "want two instance IDs, got %q", line)
		}
		got := engine.SeedLeavesConflict(f[0], f[1])
		if back := engine.SeedLeavesConflict(f[1], f[0]); back != got {
			t.Errorf("%s: %s: %v one way, %v the other", d.Pos, line, got, back)
		}
		verdict := "no conflict"
		if got {
			verdict = "conflict"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", f[0], f[1], verdict)
	}
	return b.String()
}

// cmdCompileSeed: like compile, for seed selectors (CompileSelector).
func (w *world) cmdCompileSeed(t *testing.T, d *datadriven.TestData) string {
	return compileLines(t, d, allocator.CompileSelector)
}

// cmdMatchSeed: match-seed node=NAME driver=NAME, input seed selectors,
// one a line: each is one claim asking for one instance of the driver on
// the node; prints the instance it gets, or the first reason.
func (w *world) cmdMatchSeed(t *testing.T, d *datadriven.TestData) string {
	nodeName, driver := stringArg(d, "node", "node-a"), stringArg(d, "driver", "")
	st := w.seedState(d, nodeName)
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "match"}, DriverName: driver}
	var b strings.Builder
	for _, expr := range strings.Split(d.Input, "\n") {
		claim := allocator.Claim{
			Claim: &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "match", Namespace: "default"},
				Spec: resourceapi.ResourceClaimSpec{ResourceClassName: class.Name}},
			Class: class,
			ClaimParameters: &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "match", Namespace: "default"},
				Requests: []resourceapi.ResourceRequest{{DriverName: driver, ResourceRequestModel: resourceapi.ResourceRequestModel{
					Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
						{Name: "r", Selector: strings.TrimSpace(expr)}}}}}},
			},
		}
		res, err := allocator.Allocate(context.Background(), allocator.Prepare(scenarioPod(), []allocator.Claim{claim}), st)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "error: %v\n", err)
		case res.Fits:
			fmt.Fprintf(&b, "%s\n", res.Allocations[0].ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID)
		default:
			fmt.Fprintf(&b, "%s: %s\n", res.Reasons[0].Code, res.Reasons[0].Message)
		}
	}
	return b.String()
}

// cmdVersion: input versions, one a line; prints ParseVersion's canonical
// form or its error.
func (w *world) cmdVersion(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	for _, line := range strings.Split(d.Input, "\n") {
		v, err := allocator.ParseVersion(literalLine(line))
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
			continue
		}
		fmt.Fprintf(&b, "%s\n", v)
	}
	return b.String()
}
