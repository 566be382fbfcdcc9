package dynamicresources

import (
	"slices"
	"sync/atomic"

	"allot.dev/allot/internal/scheduler/framework"
)

// Answer reuse across cycles.
//
// A cycle may take, for a node, the answer an earlier cycle computed for a
// pod of the same request signature, by the node's position in the
// snapshot, without looking at the node's claims or state: checking that
// the answer still holds costs a few comparisons of values the cycle keeps
// in cache, where finding a node's claims and state costs several map
// lookups in memory the rest of the process has long evicted. An answer
// is one per part of the pod's claims (parts.go): the seed check's
// Result (the shared noSeedClaims for a pod without v1alpha2 claims)
// and, for a pod with resource.k8s.io/v1 claims, CheckV1's V1Result. The
// answer at
// position i holds when every one of these holds; each is pinned by the
// test named after it, which fails when the rule is broken (reuse_test.go
// on the view alone; where PreFilter, Filter or Reserve decide, R9 in
// controlplane_test.go and R5, R10-R12 in reusev1_test.go):
//
//	R1 the NodeInfo at i is the same object (node and pods unchanged)
//	   [TestReuseNeedsTheSameNodeInfo]
//	R2 the request signature is the same [TestReuseNeedsTheSameSignature]
//	R3 the answer was computed on an Objects this cycle's Objects derives
//	   from through claim events alone (WithClaimChanges, of both
//	   versions, the scheduler's and a simulation's): NewObjects and Next
//	   start a new line (allocator.ClaimSet.Gen numbers every Objects in the process);
//	   slices, classes and taint rules change only through Next
//	   [TestReuseNeedsAnAncestor]
//	R4 no link since then touched the node: changed its allocated
//	   v1alpha2 claims [TestReuseSkipsTouchedNodes], or a v1 claim on
//	   devices of a pool local to the node, seed or v1 (one device-use
//	   state) [TestReuseSkipsNodesTouchedByV1Claims]; a v1 claim on a
//	   pool not local to one node (or unknown) touches every node
//	   (allocator.Touch.All), and so does the first v1 claim of Objects
//	   listed without any (their inventory gains the seed devices)
//	   [TestReuseSkipsAllNodesAfterSharedPoolClaims]
//	R5 the node has no claims of pods in flight in this cycle (of either
//	   version, on its local pools): such nodes are neither answered from
//	   nor remembered [TestReuseSkipsNodesWithPodsInFlight,
//	   TestReuseSkipsNodesWithV1PodsInFlight]; while a pod
//	   in flight holds v1 devices of a pool not local to one node, the
//	   cycle neither answers nor remembers at all
//	   [TestReuseOffWhileSharedPoolsAreInFlight]
//	R6 the ancestry is kept maxAncestry links long (WithClaimChanges cuts
//	   it), so an answer older than that is not taken... [TestReuseAncestryIsBounded]
//	R7 ...unless it was taken in the older half of the ancestry, which
//	   stamps it again with the current Objects, so answers of nodes that
//	   stay unchanged live on [TestReuseRestampsAgingAnswers]
//	R8 the slots are the plugin's, by position: a snapshot of another
//	   length starts them afresh [TestReuseSlotsFollowTheSnapshotLength]
//	R9 a cycle reuses only when the request has a signature and no claim
//	   is allocated by a driver's controller (PreFilter)
//	   [TestReuseNeedsASignatureAndNoControlPlaneClaims]
//	R10 a pod with v1 claims reuses only when its v1 request has a
//	   signature too (allocator.V1Request.Signature: no allocated v1
//	   claim, versioned DeviceClasses), and so do its v1alpha2 claims
//	   if it has any; the cycle's signature is the parts' joined
//	   (reuseSignature), and a slot keeps one answer per part, up to
//	   the first that rejects the node (parts.go). The v1 answer
//	   counts the pod's own seed allocations on the node
//	   (ownSeedResults), which the node's state and the seed signature
//	   fix [TestReuseNeedsSignaturesOfBothVersions]
//	R11 a pod whose extended resources DRA may serve reuses nothing: its
//	   v1 claims differ per node (variantOn)
//	   [TestReuseNeedsNoExtendedResources]
//	R12 a reused answer names the claims of the pod it was computed for:
//	   the cycle takes it For its own request (Result.For, ReasonsFor;
//	   V1Result.For keeps CheckV1's solution, whose Build writes the
//	   pod's claims' config and share IDs) wherever it reads reasons or
//	   allocations
//	   (Filter, Reserve, ResultV1) [TestReusedV1AnswersAreTheCyclesOwn]
//
// The seed answers come from allocator.CheckReusing, which also gives a
// node state's last answer again within a cycle.

// reuseView is one cycle's view of the plugin's answers (see above).
type reuseView struct {
	slots []atomic.Pointer[slotAnswer] // the plugin's, shared by cycles
	gens  []uint64                     // of the Objects' ancestry, nearest first (the cycle's own)
	stale [][]uint64                   // per ancestry entry: bitmap of the positions whose answers from it do not hold
}

// slotAnswer is the last answer computed, without in-flight claims, at
// one position of a snapshot: the answers of the pod's parts (parts.go),
// up to the first that rejected the node.
type slotAnswer struct {
	ni  *framework.NodeInfo
	gen atomic.Uint64 // of the Objects it was computed on, or restamped with (R7)
	sig string
	answers
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
	if s.inFlightV1.All {
		return nil // R5: every node counts claims no Objects has
	}
	cur := make([]uint64, words)
	for node := range s.extra {
		mark(cur, node)
	}
	for _, node := range s.inFlightV1.Nodes {
		mark(cur, node)
	}
	v := &reuseView{slots: *slots}
	for a := s.objects.claims; a != nil; a = a.Parent() {
		v.gens, v.stale = append(v.gens, a.Gen()), append(v.stale, cur)
		if a.TouchedAll() {
			cur = make([]uint64, words)
			for w := range cur {
				cur[w] = ^uint64(0)
			}
		} else if len(a.Touched()) > 0 {
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
func (v *reuseView) answer(i int, ni *framework.NodeInfo, sig string) *slotAnswer {
	if v == nil || i < 0 || i >= len(v.slots) {
		return nil
	}
	e := v.slots[i].Load()
	if e == nil || e.ni != ni || e.sig != sig {
		return nil
	}
	k := slices.Index(v.gens, e.gen.Load())
	if k < 0 || v.stale[k][i/64]&(1<<(i%64)) != 0 {
		return nil
	}
	if k > 0 && k >= len(v.gens)/2 {
		// Still true, but about to fall off the ancestry: say so on the
		// current Objects (in place: the answer is the same, and a
		// cycle on another line that reads the new stamp only misses it).
		e.gen.Store(v.gens[0])
	}
	return e
}

// remember keeps the answer computed at position i on this cycle's
// Objects, unless the node has claims of pods in flight (R5): such an
// answer counts claims no Objects has.
func (v *reuseView) remember(i int, ni *framework.NodeInfo, sig string, ans *answers) {
	if v == nil || i < 0 || i >= len(v.slots) || v.stale[0][i/64]&(1<<(i%64)) != 0 {
		return
	}
	a := &slotAnswer{ni: ni, sig: sig, answers: *ans}
	a.gen.Store(v.gens[0])
	v.slots[i].Store(a)
}

// reuseSignature is the signature of the pod's answers (R2, R9-R11):
// the signatures of the parts with claims of their own, joined (the
// first part's when none has); "" when answers are not to be shared.
func (s *stateData) reuseSignature() string {
	out, first, n := "", "", 0
	for k, part := range s.parts {
		sig, has := part.signature()
		if k == 0 {
			first = sig
		}
		if !has {
			continue
		}
		if sig == "" {
			return ""
		}
		if n > 0 {
			out += "\x00"
		}
		out, n = out+sig, n+1
	}
	if n == 0 {
		return first
	}
	return out
}
