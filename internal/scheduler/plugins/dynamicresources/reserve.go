package dynamicresources

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reserve implements framework.ReservePlugin: the pod's claims, allocated
// on nodeName and reserved for the pod, are kept in memory so that the
// next cycles do not hand out the same instances.
func (p *DynamicResources) Reserve(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	s, ok := readState(state)
	if !ok || s.req == nil {
		return nil
	}
	if pending := s.pendingClaims(); len(pending) > 0 {
		// The scheduler negotiates first (Negotiate); simulations cannot
		// allocate for a driver's controller.
		return framework.NewStatus(framework.Wait, ReasonWaitingForAllocation).WithDetail("claim %s", pending[0].key)
	}
	for _, part := range s.parts {
		if err := part.reserve(ctx, pod, nodeName); err != nil {
			return framework.AsStatus(err)
		}
	}
	self := podKey(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	s.held = s.held[:0]
	for _, part := range s.parts {
		s.held = append(s.held, part.chosen(self)...)
	}
	for _, m := range s.held {
		p.reserved[m.key()] = m
	}
	for _, k := range s.fenceKeys() {
		p.inflight[k] = append(p.inflight[k], &ticket{pod: self, done: make(chan struct{})})
	}
	return nil
}

// fenceKeys lists the (node, driver) pairs of the pod's new structured
// allocations, sorted.
func (s *stateData) fenceKeys() [][2]string {
	var keys [][2]string
	for _, part := range s.parts {
		keys = part.fences(keys)
	}
	slices.SortFunc(keys, compareKey)
	return slices.Compact(keys)
}

// release ends the pod's tickets. Callers hold p.mu.
func (p *DynamicResources) release(s *stateData, self string) {
	for _, k := range s.fenceKeys() {
		p.inflight[k] = slices.DeleteFunc(p.inflight[k], func(t *ticket) bool {
			if t.pod == self {
				close(t.done)
				return true
			}
			return false
		})
		if len(p.inflight[k]) == 0 {
			delete(p.inflight, k)
		}
	}
}

// awaitEarlier waits until the bindings reserved before the pod's on the
// same (node, driver) pairs have ended.
func (p *DynamicResources) awaitEarlier(ctx context.Context, keys [][2]string, self string) error {
	p.mu.Lock()
	var wait []chan struct{}
	for _, k := range keys {
		for _, t := range p.inflight[k] {
			if t.pod == self {
				break
			}
			wait = append(wait, t.done)
		}
	}
	p.mu.Unlock()
	for _, ch := range wait {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for earlier bindings on the same node: %w", ctx.Err())
		}
	}
	return nil
}

// bound returns the pod's claims as the binding to nodeName will leave
// them, and which of them the pod allocates.
func (s *stateData) bound(pod *corev1.Pod, nodeName string) ([]*resourceapi.ResourceClaim, []bool, error) {
	res := s.seedAnswer(s.results.index(nodeName))
	if res == nil {
		return nil, nil, fmt.Errorf("%s: reserve on node %s, which was not filtered", Name, nodeName)
	}
	if !res.Fits {
		return nil, nil, fmt.Errorf("%s: reserve on node %s, where the claims do not fit", Name, nodeName)
	}
	var out []*resourceapi.ResourceClaim
	var newly []bool
	var allocs []*resourceapi.AllocationResult
	if res != noSeedClaims {
		// allocate may keep another request's fitting answer
		allocs = res.For(s.req).Build()
	}
	for i, c := range s.req.Claims() {
		claim := c.Claim.DeepCopy()
		a := allocs[i]
		if a != nil {
			claim.Status.Allocation = a
			claim.Status.DriverName = c.Class.DriverName
			if !slices.Contains(claim.Finalizers, resourceapi.DeleteProtectionFinalizer) {
				claim.Finalizers = append(claim.Finalizers, resourceapi.DeleteProtectionFinalizer)
			}
		}
		addReservation(claim, pod)
		out = append(out, claim)
		newly = append(newly, a != nil)
	}
	// Claims a driver's controller allocated are only reserved; the
	// binding checks that they are available on the node.
	for _, c := range s.cp {
		claim := c.claim.DeepCopy()
		addReservation(claim, pod)
		out = append(out, claim)
		newly = append(newly, false)
	}
	return out, newly, nil
}

// addReservation adds the pod to the claim's reservedFor unless it is
// there.
func addReservation(claim *resourceapi.ResourceClaim, pod *corev1.Pod) {
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
		return r.Resource == "pods" && r.Name == pod.Name && r.UID == pod.UID
	}) {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods", Name: pod.Name, UID: pod.UID,
		})
	}
}

// Unreserve implements framework.ReservePlugin: it drops the pod's
// in-memory claims.
func (p *DynamicResources) Unreserve(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ string) {
	s, ok := readState(state)
	if !ok {
		return
	}
	self := podKey(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range s.held {
		if k := m.key(); p.reserved[k] == m {
			delete(p.reserved, k)
		}
	}
	p.release(s, self)
}

// ContributeBinding implements framework.BindContributor.
// Pods reserved earlier on the same (node, driver) are waited for (until
// ctx ends), so that the fence covers their bindings.
func (p *DynamicResources) ContributeBinding(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, _ string, b *corev1.Binding) *framework.Status {
	s, ok := readState(state)
	if !ok || s.req == nil {
		return nil
	}
	if s.committed {
		s.contributeReservations(b)
		return nil
	}
	for _, part := range s.parts {
		if err := part.contribute(b); err != nil {
			return framework.AsStatus(err)
		}
	}
	keys := s.fenceKeys()
	if err := p.awaitEarlier(ctx, keys, podKey(pod)); err != nil {
		return framework.AsStatus(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		rev := maxRevision(s.objects.Revision(), strconv.FormatUint(p.fences[k], 10))
		b.AllocationFences = append(b.AllocationFences, corev1.AllocationFence{NodeName: k[0], DriverName: k[1], Revision: rev})
	}
	return nil
}

// contributeReservations lists the pod's claims to be reserved only: the
// second step of a two-step binding, after the first committed them.
func (s *stateData) contributeReservations(b *corev1.Binding) {
	for _, m := range s.held {
		b.ResourceClaims = append(b.ResourceClaims, corev1.BindingResourceClaim{Name: m.name()})
	}
}

func compareKey(a, b [2]string) int {
	if a[0] != b[0] {
		if a[0] < b[0] {
			return -1
		}
		return 1
	}
	switch {
	case a[1] < b[1]:
		return -1
	case a[1] > b[1]:
		return 1
	}
	return 0
}

// PostBind implements framework.PostBindPlugin: the binding's revision
// fences this plugin's next allocations on the same (node, driver), and
// tells when the informers have caught up with the in-memory claims.
func (p *DynamicResources) PostBind(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ string, revision string) {
	s, ok := readState(state)
	if !ok {
		return
	}
	rev := parseRev(revision)
	self := podKey(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.release(s, self)
	for _, k := range s.fenceKeys() {
		p.fences[k] = max(p.fences[k], rev)
	}
	for _, m := range s.held {
		if p.reserved[m.key()] == m {
			m.bindRev = max(rev, 1)
		}
	}
	p.rekeyExtended(s, self)
}

// BoundClaims returns the pod's claims as Reserve chose them (allocated
// and reserved for the pod), for simulations that bind in memory.
func BoundClaims(state *framework.CycleState) []*resourceapi.ResourceClaim {
	s, ok := readState(state)
	if !ok {
		return nil
	}
	return s.chosen
}

// Result returns the allocator's result on node from the cycle, or nil
// when the pod has no claims or the node was not judged by this plugin.
func Result(state *framework.CycleState, node string) *allocator.Result {
	s, ok := readState(state)
	if !ok {
		return nil
	}
	i := s.results.index(node)
	r := s.seedAnswer(i)
	switch {
	case r == nil || s.req == nil:
		return nil
	case r == noSeedClaims:
		return s.checkNoClaims(i)
	}
	return r.For(s.req)
}

// checkNoClaims is allocator.Check's answer on node i for a request
// without claims (the node's capacity, fitting), which Filter left to the
// shared noSeedClaims. The cycle's state does not change once built, so
// it is the answer Filter would have had.
func (s *stateData) checkNoClaims(i int) *allocator.Result {
	node := s.results.node(i)
	st, _ := s.objects.nodeState(node)
	if st == nil {
		return nil
	}
	if s.extra[node.Name] {
		st = s.derived.view(s.cycle.state(), node, st)
	}
	res, err := allocator.Check(context.Background(), s.req, st)
	if err != nil {
		// Unreachable: Check fails only when its search runs out of
		// time, and a request without claims searches nothing.
		return nil
	}
	return res
}

// AwaitsRecordedClaims reports whether the cycle's pod waits only for
// claims that its template entries name in its status but the snapshot
// does not have yet. The claim controller records a claim only after
// creating it, so that is the lag between the scheduler's pod and claim
// informers, over in milliseconds when the claim's event arrives.
func AwaitsRecordedClaims(state *framework.CycleState) bool {
	s, ok := readState(state)
	return ok && s.unseen > 0 && s.unseen == len(s.reasons)
}

// PodReasons returns why PreFilter rejected the pod or made it wait, with
// the allocator's codes.
func PodReasons(state *framework.CycleState) []allocator.Reason {
	s, ok := readState(state)
	if !ok {
		return nil
	}
	return s.reasons
}

// EventsToRegister implements framework.EnqueueExtensions: the pod's own
// claims appearing, changing or going away, and other claims' allocations
// being freed (claimHint); new or changed slices, classes and
// parameters; a driver's answer in the pod's PodSchedulingContext (or its
// deletion). Vendor kinds are not watched; their generated parameters
// are.
func (*DynamicResources) EventsToRegister() []framework.ClusterEventWithHint {
	addUpdate := framework.Add | framework.Update
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.All}, Hint: claimHint},
		{Event: framework.ClusterEvent{Resource: framework.NodeResourceSlice, ActionType: addUpdate}},
		{Event: framework.ClusterEvent{Resource: framework.ResourceClass, ActionType: addUpdate}},
		{Event: framework.ClusterEvent{Resource: framework.ResourceClaimParams, ActionType: addUpdate}},
		{Event: framework.ClusterEvent{Resource: framework.ResourceClassParams, ActionType: addUpdate}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Update}, Hint: nodeExtendedHint},
		{Event: framework.ClusterEvent{Resource: framework.PodSchedulingContext, ActionType: framework.All}, Hint: contextHint},
		{Event: framework.ClusterEvent{Resource: framework.ResourceClaimV1, ActionType: framework.All}, Hint: claimHintV1},
		{Event: framework.ClusterEvent{Resource: framework.ResourceSlice, ActionType: addUpdate}},
		{Event: framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: addUpdate}},
		{Event: framework.ClusterEvent{Resource: framework.DeviceTaintRule, ActionType: framework.All}},
	}
}

// contextHint queues a pod when drivers changed the status of its
// PodSchedulingContext, or the context was deleted; the scheduler's own
// writes of the spec do not move it.
func contextHint(pod *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
	old, _ := oldObj.(*resourceapi.PodSchedulingContext)
	cur, _ := newObj.(*resourceapi.PodSchedulingContext)
	sc := cur
	if sc == nil {
		sc = old
	}
	switch {
	case sc == nil || sc.Namespace != pod.Namespace || sc.Name != pod.Name:
		return framework.QueueSkip
	case cur == nil:
		return framework.Queue
	case old == nil:
		if len(cur.Status.ResourceClaims) > 0 {
			return framework.Queue
		}
		return framework.QueueSkip
	case !equality.Semantic.DeepEqual(old.Status, cur.Status):
		return framework.Queue
	}
	return framework.QueueSkip
}

// claimHint queues a pod on an event about one of its own claims (named
// by its spec or status, or created for it from a template: owned by the
// pod), whatever changed: it may have appeared, been allocated,
// deallocated by its driver, released by another consumer or deleted. An
// event about another claim can only help by freeing instances: its
// allocation cleared, or the claim deleted while allocated; that queues
// the pod once all its claims are known (a pod waiting for a template's
// claim to be recorded is moved by that status update). Other claims
// being created, allocated or reserved cannot make the pod fit.
func claimHint(pod *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
	return judgeClaimEvent(pod, seedHintClaim(oldObj), seedHintClaim(newObj))
}

// hintClaim is what claimHint judges a claim by, for either version: its
// metadata (nil when the object is not a claim) and whether it is
// allocated. It points into the claim: nothing is copied to judge an
// event.
type hintClaim struct {
	meta      *metav1.ObjectMeta
	allocated bool
}

func seedHintClaim(o any) hintClaim {
	if c, ok := o.(*resourceapi.ResourceClaim); ok && c != nil {
		return hintClaim{meta: &c.ObjectMeta, allocated: c.Status.Allocation != nil}
	}
	return hintClaim{}
}

func judgeClaimEvent(pod *corev1.Pod, oldC, newC hintClaim) framework.QueueingHint {
	c := newC
	if c.meta == nil {
		c = oldC
	}
	if c.meta == nil {
		return framework.Queue // not a claim: nothing to judge by
	}
	if c.meta.Namespace == pod.Namespace && ownedByPod(c.meta, pod) {
		return framework.Queue
	}
	known := true
	for _, pc := range pod.Spec.ResourceClaims {
		switch n := entryClaim(pod, pc); {
		case n == "":
			known = false
		case n == c.meta.Name && c.meta.Namespace == pod.Namespace:
			return framework.Queue
		}
	}
	if known && oldC.meta != nil && oldC.allocated && (newC.meta == nil || !newC.allocated) {
		return framework.Queue
	}
	return framework.QueueSkip
}

// ownedByPod reports whether the claim is the one generated for one of
// the pod's template entries (resourceapi.GeneratedFor: the claim
// controller's annotation and the pod as controlling owner).
func ownedByPod(m *metav1.ObjectMeta, pod *corev1.Pod) bool {
	uid, _, ok := resourceapi.GeneratedForMeta(m)
	return ok && pod.UID != "" && uid == pod.UID
}
