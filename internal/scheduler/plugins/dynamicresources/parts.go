package dynamicresources

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A pod's claims are judged, reserved and bound through one interface
// whatever the resource.k8s.io version they are stored in: the shared
// steps (Filter, Score, Reserve, Unreserve, ContributeBinding, PostBind
// and answer reuse) loop over the pod's parts, one per version, and each
// part does what its API decides: how its claims are judged on a node,
// how a result is written into a claim and the binding, how a claim is
// named. The parts come in order, the v1alpha2 part first: the v1 part
// counts the pod's own v1alpha2 allocations on the node (ownSeedResults).
// A part's answer on a node is the allocator's (*allocator.Result or
// *allocator.V1Result), kept by the part as the node's and, for answer
// reuse, by the plugin's slots in the parts' order.

// claimPart is one version's share of a pod's claims in a cycle.
type claimPart interface {
	// prepare checks, once PreFilter has found the claims, that the
	// part's request can be judged on a snapshot of n nodes: a status
	// when it cannot (a Wait for a missing class, or the pod-level
	// reasons), nil when it can.
	prepare(pod *corev1.Pod, n int) *framework.Status
	// signature is the part's request signature for answer reuse ("":
	// its answers are not to be shared), and whether the part has claims
	// of its own to judge.
	signature() (sig string, has bool)
	// judge answers on node, at position i of the cycle's snapshot, once
	// per cycle; st is the node's base seed state when the caller has
	// looked it up (Filter: judged afresh), nil to take the cycle's answer
	// if there is one.
	judge(ctx context.Context, node *corev1.Node, st *allocator.NodeState, i int) (any, error)
	// take keeps an earlier cycle's answer a as node i's (answer reuse).
	take(i int, a any)
	// rejected is the Filter status of the answer a on node, nil when the
	// part's claims fit there.
	rejected(node *corev1.Node, a any) *framework.Status
	// score is a's score from 0 to 100, and whether it counts (the part
	// has claims of its own).
	score(a any) (int, bool)
	// reserve chooses the part's claims as the binding to node will leave
	// them (allocated there and reserved for pod).
	reserve(ctx context.Context, pod *corev1.Pod, node string) error
	// chosen are the claims reserve chose, as the in-memory claims of the
	// pod self (Reserve keeps them, stateData.held).
	chosen(self string) []*memClaim
	// contribute adds the chosen claims to the binding, with the
	// resourceVersions they were decided on and the new allocations.
	contribute(b *corev1.Binding) error
	// fences appends to keys the (node, driver) fences of the new
	// allocations.
	fences(keys [][2]string) [][2]string
}

// maxParts is the number of resource.k8s.io versions a pod's claims may
// be stored in.
const maxParts = 2

// makeParts is the pod's parts: the v1alpha2 part always (its claims, and
// those a driver's controller allocates), the v1 part when the pod has v1
// claims or extended resources DRA may serve.
func (s *stateData) makeParts() []claimPart {
	if s.v1 == nil {
		return []claimPart{partSeed{s}}
	}
	return []claimPart{partSeed{s}, partV1{s}}
}

// answers are the parts' answers on one node, in the parts' order: all of
// them, or up to the first that rejects the node (rejected).
type answers struct {
	of       [maxParts]any
	n        int
	rejected bool
}

// final reports whether the answers decide a pod with n parts.
func (a *answers) final(n int) bool { return a.n == n || (a.n > 0 && a.rejected) }

// partSeed is the resource.k8s.io/v1alpha2 part (the seed claims).
type partSeed struct{ s *stateData }

func (p partSeed) prepare(_ *corev1.Pod, n int) *framework.Status {
	if rs := p.s.req.Unresolvable(); len(rs) > 0 {
		p.s.reasons = rs
		return podLevelStatus(rs)
	}
	if len(p.s.req.Claims()) > 0 || p.s.v1 == nil {
		// Without claims of its own, beside a v1 part, the seed part's
		// answer is noSeedClaims on every node the v1 part judged
		// (seedAnswer): it keeps none.
		p.s.results.byNode = make([]*allocator.Result, n)
	}
	return nil
}

// seedAnswer is the seed part's answer on node i of the snapshot: the one
// kept, or noSeedClaims on a node the v1 part judged when the seed part
// keeps none (a pod whose claims are all v1); nil when the node was not
// judged.
func (s *stateData) seedAnswer(i int) *allocator.Result {
	if s.results.byNode != nil || s.v1 == nil {
		return s.results.load(i)
	}
	s.v1.mu.Lock()
	defer s.v1.mu.Unlock()
	if i >= 0 && i < len(s.v1.results) && s.v1.results[i] != nil {
		return noSeedClaims
	}
	return nil
}

func (p partSeed) signature() (string, bool) { return p.s.sig, len(p.s.req.Claims()) > 0 }

func (p partSeed) judge(ctx context.Context, node *corev1.Node, st *allocator.NodeState, i int) (any, error) {
	if len(p.s.req.Claims()) == 0 {
		// A pod whose claims are all v1 (or a driver's controller's):
		// the seed part fits every node with nothing to allocate, which
		// one shared answer says; Result builds a node's full answer
		// (its capacity) when asked.
		p.s.results.store(i, noSeedClaims) // kept only when there is no v1 part
		return noSeedClaims, nil
	}
	var res *allocator.Result
	var err error
	if st != nil {
		res, err = p.s.check(ctx, node, st, i)
	} else {
		res, err = p.s.result(ctx, node, i)
	}
	if err != nil {
		return nil, fmt.Errorf("allocate on node %s: %w", node.Name, err)
	}
	return res, nil
}

func (p partSeed) take(i int, a any) { p.s.results.store(i, a.(*allocator.Result)) }

func (p partSeed) rejected(_ *corev1.Node, a any) *framework.Status {
	if res := a.(*allocator.Result); !res.Fits {
		return p.s.results.status(res.ReasonsFor(p.s.req))
	}
	return nil
}

func (p partSeed) score(a any) (int, bool) {
	return min(max(a.(*allocator.Result).Score, 0), 100), len(p.s.req.Claims()) > 0
}

func (p partSeed) reserve(_ context.Context, pod *corev1.Pod, node string) error {
	chosen, newly, err := p.s.bound(pod, node)
	if err != nil {
		return err
	}
	p.s.chosen, p.s.newly = chosen, newly
	return nil
}

func (p partSeed) chosen(self string) []*memClaim {
	out := make([]*memClaim, len(p.s.chosen))
	for i, c := range p.s.chosen {
		out[i] = &memClaim{seed: c, pod: self}
	}
	return out
}

func (p partSeed) contribute(b *corev1.Binding) error {
	s := p.s
	for i, c := range s.chosen {
		bc := corev1.BindingResourceClaim{Name: c.Name, ResourceVersion: s.base[claimKey(c)]}
		if s.newly[i] {
			raw, err := json.Marshal(c.Status.Allocation)
			if err != nil {
				return fmt.Errorf("encode allocation of claim %s: %w", claimKey(c), err)
			}
			bc.DriverName = c.Status.DriverName
			bc.Allocation = &runtime.RawExtension{Raw: raw}
		}
		b.ResourceClaims = append(b.ResourceClaims, bc)
	}
	return nil
}

func (p partSeed) fences(keys [][2]string) [][2]string {
	for i, c := range p.s.chosen {
		if !p.s.newly[i] {
			continue
		}
		for _, h := range c.Status.Allocation.ResourceHandles {
			if h.StructuredData != nil {
				keys = append(keys, [2]string{h.StructuredData.NodeName, h.DriverName})
			}
		}
	}
	return keys
}

// noSeedClaims is the seed part's answer on every node for a pod without
// v1alpha2 claims of its own to allocate: it fits, with nothing to
// allocate or score. Shared and never modified; Result replaces it with
// the node's allocator.Check answer.
var noSeedClaims = &allocator.Result{Fits: true, Score: 100}

// partV1 is the resource.k8s.io/v1 part (v1.go): the pod's v1 claims and,
// on nodes where DRA serves some of its extended resources, the claim
// built for them (extended.go).
type partV1 struct{ s *stateData }

func (p partV1) prepare(pod *corev1.Pod, n int) *framework.Status {
	p.s.v1.results = make([]*allocator.V1Result, n)
	return p.s.prepareV1(pod)
}

func (p partV1) signature() (string, bool) {
	v := p.s.v1
	if v.ext != nil || v.req == nil {
		return "", true // R11
	}
	if sig := v.req.Signature(); sig != "" {
		return "v1:" + sig, true
	}
	return "", true
}

func (p partV1) judge(ctx context.Context, node *corev1.Node, _ *allocator.NodeState, i int) (any, error) {
	res, err := p.s.checkV1(ctx, node, i)
	if err != nil {
		return nil, fmt.Errorf("allocate resource.k8s.io/v1 claims on node %s: %w", node.Name, err)
	}
	return res, nil
}

func (p partV1) take(i int, a any) { p.s.v1.store(i, a.(*allocator.V1Result)) }

func (p partV1) rejected(node *corev1.Node, a any) *framework.Status {
	res := a.(*allocator.V1Result)
	if res.Fits {
		return nil
	}
	if vr := p.s.variantOn(node); vr != nil {
		return servedStatus(vr, p.s.v1.ext.reqs, res.Reasons)
	}
	return p.s.results.status(res.ReasonsFor(p.s.v1.req))
}

func (p partV1) score(a any) (int, bool) {
	return min(max(a.(*allocator.V1Result).Score, 0), 100), true
}

func (p partV1) reserve(ctx context.Context, pod *corev1.Pod, nodeName string) error {
	s := p.s
	i := s.results.index(nodeName)
	node := s.results.node(i)
	if node == nil {
		return fmt.Errorf("%s: reserve on node %s, which was not filtered", Name, nodeName)
	}
	chosen, newly, err := s.boundV1(ctx, pod, node, i)
	if err != nil {
		return err
	}
	s.v1.chosen, s.v1.newly = chosen, newly
	return nil
}

func (p partV1) chosen(self string) []*memClaim {
	v := p.s.v1
	out := make([]*memClaim, len(v.chosen))
	for i, c := range v.chosen {
		out[i] = &memClaim{v1: c, pod: self, ext: v.isExtended(i)}
	}
	return out
}

func (p partV1) contribute(b *corev1.Binding) error {
	s, v := p.s, p.s.v1
	if vr := v.variant; vr != nil {
		b.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{
			ResourceClaimName: v.chosen[len(v.chosen)-1].Name, RequestMappings: slices.Clone(vr.mappings)}
	}
	for i, c := range v.chosen {
		bc := corev1.BindingResourceClaim{Name: c.Name, ResourceVersion: s.base[claimKeyV1(c)]}
		if v.newly[i] {
			alloc := c.Status.Allocation
			if HasBindingConditions(c) {
				// As Kubernetes: when the allocation was made, for
				// drivers that time their binding conditions.
				alloc = alloc.DeepCopy()
				alloc.AllocationTimestamp = &metav1.Time{Time: time.Now()}
			}
			raw, err := json.Marshal(alloc)
			if err != nil {
				return fmt.Errorf("encode allocation of claim %s: %w", claimKeyV1(c), err)
			}
			bc.Allocation = &runtime.RawExtension{Raw: raw}
		}
		b.ResourceClaims = append(b.ResourceClaims, bc)
	}
	return nil
}

func (p partV1) fences(keys [][2]string) [][2]string {
	return append(keys, p.s.fenceKeysV1(p.s.v1.node)...)
}
