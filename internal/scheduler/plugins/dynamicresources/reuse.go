package dynamicresources

import (
	"slices"
	"sync/atomic"

	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
)

// Answer reuse across cycles.
//
// A cycle may take, for a node, the answer an earlier cycle computed for a
// pod of the same request signature, by the node's position in the
// snapshot, without looking at the node's claims or state: checking that
// the answer still holds costs a few comparisons of values the cycle keeps
// in cache, where finding a node's claims and state costs several map
// lookups in memory the rest of the process has long evicted. The answer
// at position i holds when every one of these holds; each is pinned by the
// test named after it (reuse_test.go), which fails when the rule is
// broken:
//
//	R1 the NodeInfo at i is the same object (node and pods unchanged)
//	   [TestReuseNeedsTheSameNodeInfo]
//	R2 the request signature is the same [TestReuseNeedsTheSameSignature]
//	R3 the answer was computed on an Objects this cycle's Objects derives
//	   from through claim events alone (WithClaimUpdates,
//	   WithClaimChanges): NewObjects, Next and WithClaims start a new
//	   line (allocator.ClaimSet.Gen numbers every Objects in the process)
//	   [TestReuseNeedsAnAncestor]
//	R4 no link since then touched the node (changed its allocated
//	   claims) [TestReuseSkipsTouchedNodes], nor a WithClaimChanges link
//	   through a v1 claim on the node's seed devices (one device-use
//	   state: the node's seed state changed)
//	   [TestReuseSkipsNodesTouchedByV1Claims]
//	R5 the node has no claims of pods in flight in this cycle: such nodes
//	   are neither answered from nor remembered [TestReuseSkipsNodesWithPodsInFlight]
//	R6 the ancestry is kept maxAncestry links long (WithClaimUpdates cuts
//	   it), so an answer older than that is not taken... [TestReuseAncestryIsBounded]
//	R7 ...unless it was taken in the older half of the ancestry, which
//	   stamps it again with the current Objects, so answers of nodes that
//	   stay unchanged live on [TestReuseRestampsAgingAnswers]
//	R8 the slots are the plugin's, by position: a snapshot of another
//	   length starts them afresh [TestReuseSlotsFollowTheSnapshotLength]
//	R9 a cycle reuses only when the request has a signature and no claim
//	   is allocated by a driver's controller (PreFilter)
//	   [TestReuseNeedsASignatureAndNoControlPlaneClaims]
//	R10 a cycle reuses only when the pod has no resource.k8s.io/v1 claim
//	   (PreFilter): answers are the seed check's, and the v1 part is
//	   judged on every node each cycle (issue 27 point 2 brings v1
//	   answers into reuse) [TestReuseNeedsNoV1Claims]
//
// The answers themselves come from allocator.CheckReusing, and a reused
// answer names the claims of the request it was computed for: callers take
// it For their own request (or its ReasonsFor).

// reuseView is one cycle's view of the plugin's answers (see above).
type reuseView struct {
	slots []atomic.Pointer[slotAnswer] // the plugin's, shared by cycles
	gens  []uint64                     // of the Objects' ancestry, nearest first (the cycle's own)
	stale [][]uint64                   // per ancestry entry: bitmap of the positions whose answers from it do not hold
}

// slotAnswer is the last answer computed, without in-flight claims, at
// one position of a snapshot.
type slotAnswer struct {
	ni  *framework.NodeInfo
	gen uint64 // of the Objects it was computed on
	sig string
	res *allocator.Result
}

// reuseView builds the cycle's view of the plugin's answers.
func (p *DynamicResources) reuseView(s *stateData, snap *framework.Snapshot) *reuseView {
	n := snap.Len()
	slots := p.slots.Load()
	if slots == nil || len(*slots) != n {
		fresh := make([]atomic.Pointer[slotAnswer], n)
		p.slots.Store(&fresh)
		slots = &fresh
	}
	words := (n + 63) / 64
	mark := func(bm []uint64, node string) {
		if i, ok := snap.Index(node); ok {
			bm[i/64] |= 1 << (i % 64)
		}
	}
	cur := make([]uint64, words)
	for node := range s.extra {
		mark(cur, node)
	}
	v := &reuseView{slots: *slots}
	for a := s.objects.claims; a != nil; a = a.Parent() {
		v.gens, v.stale = append(v.gens, a.Gen()), append(v.stale, cur)
		if len(a.Touched()) > 0 {
			cur = slices.Clone(cur)
			for _, i := range a.TouchedIn(snapNodes{snap}) {
				if i >= 0 {
					cur[i/64] |= 1 << (i % 64)
				}
			}
		}
	}
	return v
}

// answer returns the answer remembered at position i if it holds for
// this cycle (see reuseView), else nil.
func (v *reuseView) answer(i int, ni *framework.NodeInfo, sig string) *allocator.Result {
	if v == nil || i < 0 || i >= len(v.slots) {
		return nil
	}
	e := v.slots[i].Load()
	if e == nil || e.ni != ni || e.sig != sig {
		return nil
	}
	k := slices.Index(v.gens, e.gen)
	if k < 0 || v.stale[k][i/64]&(1<<(i%64)) != 0 {
		return nil
	}
	if k > 0 && k >= len(v.gens)/2 {
		// Still true, but about to fall off the ancestry: say so on the
		// current Objects.
		v.slots[i].Store(&slotAnswer{ni: ni, gen: v.gens[0], sig: sig, res: e.res})
	}
	return e.res
}

// remember keeps the answer computed at position i on this cycle's
// Objects, unless the node has claims of pods in flight (R5): such an
// answer counts claims no Objects has.
func (v *reuseView) remember(i int, ni *framework.NodeInfo, sig string, res *allocator.Result) {
	if v == nil || i < 0 || i >= len(v.slots) || v.stale[0][i/64]&(1<<(i%64)) != 0 {
		return
	}
	v.slots[i].Store(&slotAnswer{ni: ni, gen: v.gens[0], sig: sig, res: res})
}
