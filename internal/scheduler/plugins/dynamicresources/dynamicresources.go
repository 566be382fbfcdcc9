package dynamicresources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
)

// Name is the plugin's name and the key of its snapshot extension.
const Name = "DynamicResources"

// Rejection reasons of the plugin itself; the allocator's reasons (which
// quote the failing selector clause) are passed through as they are.
const (
	// ReasonWaitingFormat is the Wait reason for an object that does not
	// exist yet; %s names it.
	ReasonWaitingFormat = "waiting for %s to be created"
	// ErrReasonNoObjects is the Error of a snapshot without DRA objects.
	ErrReasonNoObjects = "the snapshot has no DRA objects (extension " + Name + ")"
	// ErrReasonNoCDI rejects nodes whose runtime cannot inject CDI devices
	// (label allot.dev/cdi: "false", seed 000). Nodes without the label, as
	// in `allot simulate` inputs, are allowed.
	ErrReasonNoCDI = "node's container runtime does not support CDI (allot.dev/cdi=false)"
)

// LabelCDI is the node label through which node agents advertise CDI
// support.
const LabelCDI = "allot.dev/cdi"

const stateKey framework.StateKey = Name

// DynamicResources is the plugin. Its in-memory reservations are shared by
// all cycles of one scheduler; create one per scheduler (or simulation).
type DynamicResources struct {
	mu       sync.Mutex
	reserved map[string]*memClaim    // the in-memory claims of both versions, by claim key
	fences   map[[2]string]uint64    // (node, driver) -> revision of our last binding there
	inflight map[[2]string][]*ticket // (node, driver) -> bindings in Reserve order

	derived derivedCache
	slots   atomic.Pointer[[]atomic.Pointer[slotAnswer]] // by snapshot position; see reuseView
	// reused counts the answers allocator.CheckReusing gave again, for
	// tests that set countReused: a counter shared by the goroutines
	// filtering nodes costs more than the answer.
	countReused bool
	reused      atomic.Int64
}

// perNode is a map by node name, safe for concurrent use, that starts
// over past perNodeMax entries (nodes come and go).
type perNode[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

const perNodeMax = 1 << 16

func (c *perNode[V]) load(node string) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[node]
	return v, ok
}

func (c *perNode[V]) store(node string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= perNodeMax {
		c.m = map[string]V{}
	}
	c.m[node] = v
}

// derivedCache remembers, per node, the node's seed state with the
// in-memory allocations of pods in flight (the seed view of the cycle's
// one device-use state, cycleState). While bindings are in flight every
// cycle needs the same derived states; a derived state that stays the
// same object (allocator.State.SeedNodeState keeps it while the node's
// instances in use are the same) lets allocator.CheckReusing answer for
// its node too.
type derivedCache struct{ perNode[*allocator.NodeState] }

// view returns the seed view of node in the cycle's state st: base (the
// node's state without pods in flight) or the cached view when either
// still holds, else a new one, which the cache keeps.
func (c *derivedCache) view(st *allocator.State, node *corev1.Node, base *allocator.NodeState) *allocator.NodeState {
	e, _ := c.load(node.Name)
	v := st.SeedNodeState(base.Model(), node, base, e)
	if v != e && v != base {
		c.store(node.Name, v)
	}
	return v
}

// cycleState is one cycle's device-use state: the Objects' base state
// with the in-memory allocations of other pods in flight, of both
// versions, that the Objects do not show yet. Built once, on first use;
// the clones of a cycle's stateData share it.
type cycleState struct {
	once    sync.Once
	base    func() *allocator.State
	addV1   []*resourcev1.ResourceClaim  // by key
	addSeed []*resourceapi.ResourceClaim // by key
	st      *allocator.State
}

func (c *cycleState) state() *allocator.State {
	c.once.Do(func() {
		c.st = c.base()
		if len(c.addV1) > 0 || len(c.addSeed) > 0 {
			c.st = c.st.WithChanges(nil, c.addV1, nil, c.addSeed)
		}
	})
	return c.st
}

// ticket is one reserved pod's pending binding on a (node, driver): later
// pods wait for it so that their fence includes its revision instead of
// failing with a conflict.
type ticket struct {
	pod  string
	done chan struct{}
}

// memClaim is a claim as a pod assumed but not yet visible in Objects
// will leave it: allocated and/or reserved for the pod. It holds the
// claim in the version it is stored in (one of seed and v1); the rest is
// the same for both.
type memClaim struct {
	seed    *resourceapi.ResourceClaim
	v1      *resourcev1.ResourceClaim
	pod     string // pod key that wrote it
	bindRev uint64 // revision of the binding, once committed
	// ext marks a pod's extended-resource claim (v1): it does not exist
	// until the binding, so its absence from the Objects does not end
	// it. The binding that created it leaves the claim named as created.
	ext bool
}

// key is the claim's namespace/name.
func (m *memClaim) key() string {
	if m.v1 != nil {
		return claimKeyV1(m.v1)
	}
	return claimKey(m.seed)
}

// name is the claim's name.
func (m *memClaim) name() string {
	if m.v1 != nil {
		return m.v1.Name
	}
	return m.seed.Name
}

// stored is the claim m holds as objs show it: its resourceVersion and
// whether it is allocated there.
func (m *memClaim) stored(objs *Objects, key string) (rv string, allocated, ok bool) {
	if m.v1 != nil {
		c, ok := objs.v1ClaimByKey(key)
		if !ok {
			return "", false, false
		}
		return c.ResourceVersion, c.Status.Allocation != nil, true
	}
	c, ok := objs.claims.Get(key)
	if !ok {
		return "", false, false
	}
	return c.ResourceVersion, c.Status.Allocation != nil, true
}

// addTo counts m, a claim of another pod in flight that objs do not show
// allocated yet, in the cycle's one device-use state, and notes the nodes
// whose seed state it changes (extra) and, for answer reuse, where it
// holds devices (inFlight).
func (m *memClaim) addTo(s *stateData, objs *Objects) {
	if m.v1 != nil {
		s.cycle.addV1 = append(s.cycle.addV1, m.v1)
		for _, n := range objs.seedNodesOf(m.v1, nil) {
			s.extra[n] = true
		}
		objs.touchOf(m.v1, &s.inFlightV1)
		return
	}
	s.cycle.addSeed = append(s.cycle.addSeed, m.seed)
	for _, n := range allocator.AllocatedNodes(m.seed) {
		s.extra[n] = true
	}
}

var (
	_ framework.PreFilterPlugin     = &DynamicResources{}
	_ framework.FilterPlugin        = &DynamicResources{}
	_ framework.IndexedFilterPlugin = &DynamicResources{}
	_ framework.IndexedScorePlugin  = &DynamicResources{}
	_ framework.PostFilterPlugin    = &DynamicResources{}
	_ framework.ScorePlugin         = &DynamicResources{}
	_ framework.ReservePlugin       = &DynamicResources{}
	_ framework.BindContributor     = &DynamicResources{}
	_ framework.PostBindPlugin      = &DynamicResources{}
	_ framework.BindClaimMaker      = &DynamicResources{}
	_ framework.EnqueueExtensions   = &DynamicResources{}
)

// New returns the plugin.
func New() *DynamicResources {
	return &DynamicResources{reserved: map[string]*memClaim{},
		fences: map[[2]string]uint64{}, inflight: map[[2]string][]*ticket{}}
}

// Name implements framework.Plugin.
func (*DynamicResources) Name() string { return Name }

// stateData is the plugin's CycleState: what PreFilter resolved, the
// per-node results of Filter, and what Reserve chose.
type stateData struct {
	objects *Objects
	req     *allocator.Request
	sig     string             // req.Signature()
	reused  *atomic.Int64      // the plugin's count of reused answers; nil when not counting
	derived *derivedCache      // the plugin's, shared across cycles
	base    map[string]string  // claim key -> resourceVersion decided on
	cycle   *cycleState        // the one device-use state with pods in flight
	extra   map[string]bool    // nodes whose seed state in-memory allocations change
	reasons []allocator.Reason // pod-level rejection
	unseen  int                // of reasons: template claims recorded in the pod's status, not in Objects
	results *nodeResults
	chosen  []*resourceapi.ResourceClaim // Reserve: the claims after binding
	newly   []bool                       // per chosen: allocated by this pod

	reuse    *reuseView // nil when answers of earlier cycles cannot be taken
	reuseSig string     // reuseSignature
	// inFlightV1 is where the in-memory v1 claims of pods in flight hold
	// devices (Objects.touchOf): answer reuse skips those nodes (R5).
	inFlightV1 allocator.Touch

	v1 *v1Part // the pod's resource.k8s.io/v1 claims; nil when it has none

	// parts are the pod's claims by version (parts.go), through which the
	// shared steps judge, reserve and bind them.
	parts []claimPart
	// held are the in-memory claims Reserve made of the parts' chosen
	// claims, as the plugin keeps them (Unreserve and PostBind find them
	// there by identity).
	held []*memClaim

	cp      []cpClaim                         // claims allocated by a driver's controller
	context *resourceapi.PodSchedulingContext // the pod's own, as the snapshot shows it
	dealloc *Deallocation                     // PostFilter's choice

	// committed: the first of a two-step binding (binding conditions)
	// committed the claims; the binding now only reserves them.
	committed bool
}

// Clone implements framework.StateData. Results are immutable values.
func (s *stateData) Clone() framework.StateData {
	cp := *s
	cp.results = s.results.clone()
	cp.chosen, cp.newly = slices.Clone(s.chosen), slices.Clone(s.newly)
	cp.cp = slices.Clone(s.cp)
	cp.v1 = s.v1.clone()
	if s.parts != nil {
		cp.parts = cp.makeParts()
	}
	cp.held = slices.Clone(s.held)
	return &cp
}

func readState(state *framework.CycleState) (*stateData, bool) {
	s, err := framework.ReadAs[*stateData](state, stateKey)
	return s, err == nil
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name + "/" + string(pod.UID) }

// PreFilter implements framework.PreFilterPlugin.
func (p *DynamicResources) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, snap *framework.Snapshot) *framework.Status {
	objs, ok := snap.Extension(Name).(*Objects)
	var ext []extRequest
	if ok && objs != nil && pod.Spec.NodeName == "" && pod.Status.ExtendedResourceClaimStatus == nil {
		// A bound pod's claim cycle leaves its extended resources alone:
		// its binding made their claim, or its node's device plugins
		// serve them.
		ext = extendedRequests(pod, objs.catalog)
	}
	if len(pod.Spec.ResourceClaims) == 0 && len(ext) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	if !ok || objs == nil {
		return framework.AsStatus(errors.New(ErrReasonNoObjects))
	}
	s := &stateData{objects: objs, base: map[string]string{}, extra: map[string]bool{}, results: newNodeResults(snap),
		context: ownContext(objs, pod), derived: &p.derived, cycle: &cycleState{base: objs.v1.baseState}}
	if p.countReused {
		s.reused = &p.reused
	}
	state.Write(stateKey, s)
	// In-memory allocations of other pods that objs does not show yet
	// count in the cycle's one state, for the claims of both versions: a
	// seed device is one device for both APIs.
	overlay := p.overlay(objs, podKey(pod))
	for _, k := range slices.Sorted(maps.Keys(overlay)) {
		m := overlay[k]
		if _, allocated, _ := m.stored(objs, k); allocated {
			continue // counted on its node already; the overlay adds reservations only
		}
		m.addTo(s, objs)
	}
	claims, st := s.resolveClaims(pod, overlay)
	if st != nil {
		return st
	}
	if len(ext) > 0 {
		if s.v1 == nil {
			s.v1 = &v1Part{}
		}
		s.v1.pod, s.v1.ext = pod, &extendedPart{reqs: ext}
	}
	s.req = allocator.Prepare(pod, claims)
	s.sig = s.req.Signature()
	s.parts = s.makeParts()
	for _, part := range s.parts {
		if st := part.prepare(pod, snap.Len()); st != nil {
			return st
		}
	}
	if s.reuseSig = s.reuseSignature(); s.reuseSig != "" && len(s.cp) == 0 {
		s.reuse = p.reuseView(s, snap)
	}
	return s.checkControlPlane(pod)
}

// resolveClaims finds the pod's claims (in-memory versions first), their
// classes and parameters; anything missing is a Wait. Claims allocated by
// a driver's controller go to s.cp: their parameters are the driver's
// business.
func (s *stateData) resolveClaims(pod *corev1.Pod, overlay map[string]memClaim) ([]allocator.Claim, *framework.Status) {
	var out []allocator.Claim
	var waiting []string
	for _, pc := range pod.Spec.ResourceClaims {
		name, missing, code := claimName(pod, pc, s.objects)
		if missing != "" {
			waiting = append(waiting, s.wait(code, "", missing))
			continue
		}
		key := pod.Namespace + "/" + name
		if base, ok := s.objects.v1ClaimByKey(key); ok {
			// Stored as resource.k8s.io/v1 (its v1alpha2 view may be
			// among the seed claims, counting its devices there).
			claim := base
			if m, ok := overlay[key]; ok && m.v1 != nil {
				claim = m.v1
			}
			s.base[key] = base.ResourceVersion
			if s.v1 == nil {
				s.v1 = &v1Part{}
			}
			s.v1.claims = append(s.v1.claims, allocator.V1Claim{Claim: claim, AdminNamespace: s.objects.v1.admin[pod.Namespace]})
			continue
		}
		var claim *resourceapi.ResourceClaim
		m, ok := overlay[key]
		if ok && m.seed != nil {
			claim = m.seed
		} else {
			claim, ok = s.objects.claims.Get(key)
		}
		if !ok {
			waiting = append(waiting, s.wait(allocator.ReasonClaimNotFound, key, "resource claim "+key))
			if pc.ResourceClaimTemplateName != nil {
				s.unseen++
			}
			continue
		}
		if base, ok := s.objects.claims.Get(key); ok {
			s.base[key] = base.ResourceVersion
		}
		if class, ok := s.objects.controlPlane(claim); ok {
			s.cp = append(s.cp, cpClaim{entry: pc.Name, key: key, claim: claim, class: class})
			continue
		}
		c, missing, code := s.objects.resolve(claim)
		if missing != "" {
			waiting = append(waiting, s.wait(code, key, missing))
			continue
		}
		out = append(out, c)
	}
	if len(waiting) > 0 {
		return nil, framework.NewStatus(framework.Wait, waiting...)
	}
	return out, nil
}

// wait records a missing object as a reason and returns the Wait reason.
func (s *stateData) wait(code allocator.ReasonCode, claim, what string) string {
	msg := fmt.Sprintf(ReasonWaitingFormat, what)
	s.reasons = append(s.reasons, allocator.Reason{Code: code, Claim: claim, Message: msg})
	return msg
}

// claimName resolves one entry of pod.spec.resourceClaims to a claim name,
// or says what is missing. A template entry's claim is the one its status
// records or, before the claim controller has recorded it, the claim in
// objs (when not nil) generated for the entry: the binding records it.
func claimName(pod *corev1.Pod, pc corev1.PodResourceClaim, objs *Objects) (name, missing string, code allocator.ReasonCode) {
	if n := entryClaim(pod, pc); n != "" {
		return n, "", ""
	}
	if objs != nil && pc.ResourceClaimTemplateName != nil {
		if n, ok := objs.GeneratedClaimV1(pod.UID, pc.Name); ok {
			return n, "", ""
		}
		if n, ok := objs.GeneratedClaim(pod.UID, pc.Name); ok {
			return n, "", ""
		}
	}
	tmpl := ""
	if pc.ResourceClaimTemplateName != nil {
		tmpl = *pc.ResourceClaimTemplateName
	}
	return "", fmt.Sprintf("the resource claim of entry %s (template %s)", pc.Name, tmpl), allocator.ReasonClaimNotFound
}

// ClaimsNamed reports whether every claim of the pod is known by name:
// named in its spec, a template's claim recorded in its status by the
// claim controller, or a claim generated for the template entry that
// generated (when not nil) reports, as the scheduler's claim informer
// shows it. Until then PreFilter can only make the pod wait; the
// scheduler keeps such a pending pod out of its active queue (a
// PreEnqueue gate) until the claim or the status update that records it
// arrives.
func ClaimsNamed(pod *corev1.Pod, generated func(podUID types.UID, entry string) bool) bool {
	for _, pc := range pod.Spec.ResourceClaims {
		if entryClaim(pod, pc) != "" {
			continue
		}
		if generated == nil || pc.ResourceClaimTemplateName == nil || !generated(pod.UID, pc.Name) {
			return false
		}
	}
	return true
}

// entryClaim is the claim name of one entry of pod.spec.resourceClaims,
// "" while a template's claim is not recorded in the pod's status.
func entryClaim(pod *corev1.Pod, pc corev1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}

// podLevelStatus maps the allocator's pod-level reasons to a status:
// claims in use or being deleted may free up; the rest needs new objects.
func podLevelStatus(rs []allocator.Reason) *framework.Status {
	code := framework.UnschedulableAndUnresolvable
	msgs := make([]string, len(rs))
	for i, r := range rs {
		msgs[i] = r.Message
		switch r.Code {
		case allocator.ReasonClaimInUse, allocator.ReasonClaimReservedForFull, allocator.ReasonClaimDeleted:
			code = framework.Unschedulable
		case allocator.ReasonClassNotFound:
			return framework.NewStatus(framework.Wait, msgs[i])
		}
	}
	return framework.NewStatus(code, msgs...)
}

// overlay returns the in-memory claims of other pods, of both versions,
// that Objects does not show yet, dropping those it now shows at or after
// their binding, or that were deleted (an extended-resource claim not
// created yet, or created by a binding the objects do not show yet,
// stays).
func (p *DynamicResources) overlay(objs *Objects, self string) map[string]memClaim {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]memClaim{} // copies: PostBind may rename an entry's claim (rekeyExtended)
	for k, m := range p.reserved {
		rv, _, ok := m.stored(objs, k)
		switch {
		case m.ext && !ok && (m.bindRev == 0 || parseRev(objs.Revision()) < m.bindRev):
		case !ok || (m.bindRev > 0 && parseRev(rv) >= m.bindRev):
			delete(p.reserved, k)
			continue
		}
		if m.pod != self {
			out[k] = *m
		}
	}
	return out
}

func parseRev(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// Filter implements framework.FilterPlugin.
func (p *DynamicResources) Filter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.FilterAt(ctx, state, pod, ni, -1)
}

// FilterAt implements framework.IndexedFilterPlugin. A node that is not
// in the snapshot PreFilter saw is judged, but its answer is not kept.
func (p *DynamicResources) FilterAt(ctx context.Context, state *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo, i int) *framework.Status {
	s, ok := readState(state)
	if !ok || s.req == nil {
		return framework.AsStatus(fmt.Errorf("%s: filter without prefilter state", Name))
	}
	i = s.results.at(i, ni)
	if a := s.reuse.answer(i, ni, s.reuseSig); a != nil && a.final(len(s.parts)) {
		return s.reusedStatus(i, ni.Node(), a)
	}
	st, noCDI := s.objects.nodeState(ni.Node())
	if noCDI {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNoCDI)
	}
	if st := s.filterControlPlane(ni.Node()); st != nil {
		return st
	}
	var ans answers
	for _, part := range s.parts {
		a, err := part.judge(ctx, ni.Node(), st, i)
		if err != nil {
			return framework.AsStatus(err)
		}
		ans.of[ans.n], ans.n = a, ans.n+1
		if rst := part.rejected(ni.Node(), a); rst != nil {
			ans.rejected = true
			s.reuse.remember(i, ni, s.reuseSig, &ans)
			return rst
		}
	}
	s.reuse.remember(i, ni, s.reuseSig, &ans)
	return nil
}

// reusedStatus is Filter's status on node i from an earlier cycle's
// answers, which the cycle keeps as node i's (R12: its reasons are taken
// For this pod's requests; Reserve takes the allocations so too).
func (s *stateData) reusedStatus(i int, node *corev1.Node, a *slotAnswer) *framework.Status {
	if s.reused != nil {
		s.reused.Add(1)
	}
	for k := range a.n {
		s.parts[k].take(i, a.of[k])
		if st := s.parts[k].rejected(node, a.of[k]); st != nil {
			return st
		}
	}
	return nil
}

// result is the cycle's answer on node i of the snapshot: Filter's, or
// checked now.
func (s *stateData) result(ctx context.Context, node *corev1.Node, i int) (*allocator.Result, error) {
	if r := s.results.load(i); r != nil {
		return r, nil
	}
	st, _ := s.objects.nodeState(node)
	return s.check(ctx, node, st, i)
}

// check checks the claims on a node, whose base state is st, once per
// cycle, and keeps the answer as node i's; Reserve builds the
// allocations of the chosen node only. A node whose state (with the
// in-memory allocations of pods in flight) is the one an earlier pod with
// a request of the same signature was checked on takes that answer
// (allocator.CheckReusing).
func (s *stateData) check(ctx context.Context, node *corev1.Node, st *allocator.NodeState, i int) (*allocator.Result, error) {
	if s.extra[node.Name] {
		st = s.derived.view(s.cycle.state(), node, st)
	}
	res, reused, err := allocator.CheckReusing(ctx, s.req, st)
	if err != nil {
		return nil, err
	}
	if reused {
		if s.reused != nil {
			s.reused.Add(1)
		}
		// An answer is the same for every request of the signature but
		// for the claims it names and builds: keep the earlier one, and
		// let the callers take it For this request (or its ReasonsFor).
	}
	s.results.store(i, res)
	return res, nil
}

// nodeResults are one cycle's allocator answers by the node's position
// in the cycle's snapshot, and the Filter statuses made of their reasons,
// one per distinct slice of reasons: nodes that give the same reasons
// share them (see allocator.Result.For), and a framework.Status is never
// modified (WithPlugin copies it). Each node's answer is written by the
// one Filter call of the node and read after filtering has ended.
type nodeResults struct {
	snap     *framework.Snapshot
	byNode   []*allocator.Result // nil while the seed part keeps no answers (partSeed.prepare)
	statuses *sync.Map           // reasonsKey -> *framework.Status; read by the filtering goroutines, rarely written
}

// reasonsKey names a slice of reasons, which the cycle's results keep
// alive, by its first element and length.
type reasonsKey struct {
	first *allocator.Reason
	n     int
}

func newNodeResults(snap *framework.Snapshot) *nodeResults {
	return &nodeResults{snap: snap, statuses: &sync.Map{}}
}

// index is the node's position in the snapshot, -1 when it is not there.
func (r *nodeResults) index(node string) int {
	if i, ok := r.snap.Index(node); ok {
		return i
	}
	return -1
}

// at is i if ni is node i of the snapshot, else ni's own position: the
// framework's position refers to the snapshot it filters, which is the
// one PreFilter saw unless a caller mixed two.
func (r *nodeResults) at(i int, ni *framework.NodeInfo) int {
	if nodes := r.snap.Nodes(); i >= 0 && i < len(nodes) && nodes[i] == ni {
		return i
	}
	return r.index(ni.Name())
}

func (r *nodeResults) load(i int) *allocator.Result {
	if i < 0 || i >= len(r.byNode) {
		return nil
	}
	return r.byNode[i]
}

func (r *nodeResults) store(i int, res *allocator.Result) {
	if i >= 0 && i < len(r.byNode) {
		r.byNode[i] = res
	}
}

// status returns the Filter status of a node rejected for rs.
func (r *nodeResults) status(rs []allocator.Reason) *framework.Status {
	if len(rs) == 0 {
		return nodeStatus(rs)
	}
	k := reasonsKey{first: &rs[0], n: len(rs)}
	if st, ok := r.statuses.Load(k); ok {
		return st.(*framework.Status)
	}
	st, _ := r.statuses.LoadOrStore(k, nodeStatus(rs).WithPlugin(Name)) // shared: stamped once
	return st.(*framework.Status)
}

func (r *nodeResults) clone() *nodeResults {
	statuses := &sync.Map{}
	r.statuses.Range(func(k, v any) bool { statuses.Store(k, v); return true })
	return &nodeResults{snap: r.snap, byNode: slices.Clone(r.byNode), statuses: statuses}
}

// nodeStatus: instances that are in use may free up (Unschedulable); a
// node without matching instances needs new slices (Unresolvable).
func nodeStatus(rs []allocator.Reason) *framework.Status {
	code := framework.UnschedulableAndUnresolvable
	msgs := make([]string, len(rs))
	for i, r := range rs {
		msgs[i] = r.Message
		switch r.Code {
		case allocator.ReasonInUse, allocator.ReasonNotEnough, allocator.ReasonNoCombination:
			code = framework.Unschedulable
		}
	}
	return framework.NewStatus(code, msgs...)
}

// Score implements framework.ScorePlugin: the share of the node's DRA
// capacity left after the allocation (0 for pods without claims).
func (p *DynamicResources) Score(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.ScoreAt(ctx, state, pod, ni, -1)
}

// ScoreAt implements framework.IndexedScorePlugin.
func (p *DynamicResources) ScoreAt(ctx context.Context, state *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo, i int) (int64, *framework.Status) {
	s, ok := readState(state)
	if !ok || s.req == nil {
		return 0, nil
	}
	i = s.results.at(i, ni)
	// The mean of the scores of the parts with claims of their own (the
	// first part's when none has).
	sum, n, first := 0, 0, 0
	for k, part := range s.parts {
		a, err := part.judge(ctx, ni.Node(), nil, i)
		if err != nil {
			return 0, framework.AsStatus(err)
		}
		score, counts := part.score(a)
		if k == 0 {
			first = score
		}
		if counts {
			sum, n = sum+score, n+1
		}
	}
	score := first
	if n > 0 {
		score = sum / n
	}
	return int64(score), nil
}
