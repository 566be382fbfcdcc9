package allocator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	"k8s.io/apimachinery/pkg/runtime"
)

// Result is the outcome of allocating a pod's claims on one node.
type Result struct {
	Node string
	// Fits is true when every claim of the pod can be used on the node.
	Fits bool
	// Reasons explain a rejection; empty when Fits.
	Reasons []Reason
	// Allocations is parallel to Request.Claims: the allocation to store in
	// the claim's status, or nil for a claim that was already allocated.
	// Allocate fills it in; Check leaves it nil (see Build).
	Allocations []*resourceapi.AllocationResult
	// CapacityBefore and CapacityAfter are how many instances of the node
	// could be allocated at the same time before and after this allocation
	// (all drivers; partition schemes chosen to maximize the count).
	CapacityBefore, CapacityAfter int
	// Score is 100 * CapacityAfter / CapacityBefore: how much of the node
	// stays usable. 100 for a node that had no capacity to lose.
	Score int

	req    *Request
	model  *Model
	chosen map[string][]int32           // per driver: instance per item
	shape  *atomic.Pointer[reasonShape] // of Reasons, once asked (see ReasonsFor); shared by copies
}

// Allocate decides whether the prepared claims fit on the node of st, and
// how. It does not change st; apply the result with NodeState.WithAllocated
// once the claims carry their allocations. It is deterministic for equal
// inputs. The only error is ErrDeadline (wrapped with the context's error),
// returned when ctx ends before the answer is known.
func Allocate(ctx context.Context, req *Request, st *NodeState) (*Result, error) {
	res, err := Check(ctx, req, st)
	if err != nil {
		return nil, err
	}
	res.Allocations = res.Build()
	return res, nil
}

// Check is Allocate without writing the allocation results down: the
// decision, reasons, capacities and score are the same, and Build returns
// the allocations Allocate would have. A scheduler checks every node and
// builds the allocations of the one it picks.
func Check(ctx context.Context, req *Request, st *NodeState) (*Result, error) {
	node := st.model.node
	res := &Result{Node: node, req: req, shape: new(atomic.Pointer[reasonShape])}
	res.CapacityBefore = st.Capacity()
	res.CapacityAfter = res.CapacityBefore
	if len(req.reasons) > 0 {
		res.Reasons = slices.Clone(req.reasons)
		return finish(res), nil
	}
	res.Reasons = joinReasons(res.Reasons, req.nodeReasons(st))
	if len(res.Reasons) > 0 {
		return finish(res), nil
	}
	var chosen map[string][]int32
	choose := func(d string, assign []int32) {
		if chosen == nil {
			chosen = make(map[string][]int32, len(req.drivers))
		}
		chosen[d] = assign
	}
	for _, d := range req.drivers {
		dm := st.model.drivers[d]
		if dm == nil {
			res.Reasons = joinReasons(res.Reasons, req.driverMissing(d))
			continue
		}
		ds := st.stateOf(d)
		if assign, f, ok := req.flat(d, dm, ds); ok {
			if f != nil {
				res.Reasons = joinReasons(res.Reasons, req.explain(d, dm, ds, req.masks(d, dm), f))
				continue
			}
			res.CapacityAfter -= len(assign)
			choose(d, assign)
			continue
		}
		masks := req.masks(d, dm)
		kinds := make([]int, len(req.items[d]))
		for i, it := range req.items[d] {
			kinds[i] = it.kind
		}
		assign, lost, f, err := seedSearch(ctx, dm, ds, masks, kinds, len(req.kinds[d]), false)
		if err != nil {
			return nil, fmt.Errorf("allocate on node %s, driver %s: %w", node, d, err)
		}
		if f != nil {
			res.Reasons = joinReasons(res.Reasons, req.explain(d, dm, ds, masks, f))
			continue
		}
		res.CapacityAfter -= lost
		choose(d, assign)
	}
	if len(res.Reasons) == 0 {
		res.Fits = true
		res.model, res.chosen = st.model, chosen
	}
	return finish(res), nil
}

// flat answers for the common simple case without the search: a driver
// whose instances have no partitions, and requests that all ask for the
// same kind. Any free matching instance is then as good as another, and
// the search would take the first ones in listing order; so does flat.
// ok is false when the case is not simple; f is the search's failure when
// too few instances are free.
func (r *Request) flat(d string, dm *driverModel, ds *driverState) (assign []int32, f *failure, ok bool) {
	if len(dm.groups) > 0 || len(r.kinds[d]) != 1 {
		return nil, nil, false
	}
	need := int32(len(r.items[d]))
	free := int32(0)
	for l, o := range r.kinds[d][0].outcomes(dm) {
		x := dm.leaves[l]
		if o != outcomeTrue || !dm.insts[x].ok || (ds != nil && ds.used[x] > 0) {
			continue
		}
		free++
		if int32(len(assign)) < need {
			if assign == nil {
				assign = make([]int32, 0, need)
			}
			assign = append(assign, x)
		}
	}
	if free < need {
		return nil, &failure{mask: 1, need: need, capacity: free}, true
	}
	return assign, nil, true
}

// For returns, for req, the result that Check gives req on the node state
// r was checked on; r must come from Check (not Allocate) of a request
// with the same non-empty Signature as req. Only the claims change: a
// caller that remembers results per node state (the scheduler, across
// pods built from one template) answers from it without searching again.
func (r *Result) For(req *Request) *Result {
	if r.req == req || r.req == nil {
		return r
	}
	out := *r
	out.req = req
	out.Allocations = nil
	out.Reasons = req.rebind(r.req, r.Reasons)
	return &out
}

// ReasonsFor returns r's reasons as Check gives them to req: r's own
// when r answers req, else renamed to req's claims (see For). Unlike
// For it copies nothing; the slice must not be modified.
//
// Renamed reasons are kept per request by the shape of r's reasons
// (their content, claims by position): a scheduler's cycle asks this of
// hundreds of answers kept from earlier pods, and full nodes all say the
// same.
func (r *Result) ReasonsFor(req *Request) []Reason {
	if r.req == req || r.req == nil || len(r.Reasons) == 0 {
		return r.Reasons
	}
	k := r.shapeOf()
	if k == nil {
		return req.rebind(r.req, r.Reasons)
	}
	if v, ok := req.reasonMemo.Load(k); ok {
		return v.([]Reason)
	}
	v, _ := req.reasonMemo.LoadOrStore(k, req.rebind(r.req, r.Reasons))
	return v.([]Reason)
}

// reasonShape is the content of a slice of reasons with the claims they
// name replaced by their position in the request: two requests of the
// same signature with reasons of one shape get the same reasons renamed.
// Shapes are interned, so a shape's pointer names it.
type reasonShape struct{ key string }

var shapes struct {
	sync.Mutex
	m map[string]*reasonShape
}

// shapeOf returns the interned shape of r's reasons, computed once per
// Check's result (For and copies share it: renaming keeps the shape).
// nil for a Result that Check did not make.
func (r *Result) shapeOf() *reasonShape {
	if r.shape == nil {
		return nil
	}
	if s := r.shape.Load(); s != nil {
		return s
	}
	var b strings.Builder
	for _, x := range r.Reasons {
		j := -1
		if x.Claim != "" {
			j = slices.IndexFunc(r.req.claims, func(c *Claim) bool { return c.hasKey(x.Claim) })
		}
		b.WriteString(string(x.Code))
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(j))
		for _, f := range []string{x.Driver, x.Clause, x.Detail()} {
			b.WriteByte(0)
			b.WriteString(f)
		}
		if j < 0 { // kept as it is
			b.WriteByte(0)
			b.WriteString(x.Claim)
			b.WriteByte(0)
			b.WriteString(x.Message)
		}
		for _, q := range x.Requests {
			b.WriteByte(1)
			b.WriteString(q)
		}
		b.WriteByte(2)
	}
	key := b.String()
	shapes.Lock()
	s, ok := shapes.m[key]
	if !ok {
		if shapes.m == nil || len(shapes.m) >= 4096 {
			shapes.m = map[string]*reasonShape{}
		}
		s = &reasonShape{key: key}
		shapes.m[key] = s
	}
	shapes.Unlock()
	r.shape.Store(s)
	return s
}

// CheckReusing is Check that remembers, on st, its last answer to a
// request with a non-empty Signature, and gives that answer again to the
// next request of the same signature on st instead of searching: pods
// built from one template have requests of equal signature, and between
// two such pods the states of the nodes that took neither stay the same
// objects. reused tells when the answer was Check's for another request;
// take it For req before reading its Reasons or calling Build (a fitting
// answer differs only there, so a caller that looks only at Fits, the
// capacities and Score need not). The answer kept is a copy: callers may
// change the Result they get from a search.
func CheckReusing(ctx context.Context, req *Request, st *NodeState) (res *Result, reused bool, err error) {
	sig := req.Signature()
	if sig != "" {
		if m := st.memo.Load(); m != nil && m.sig == sig {
			return m.res, m.res.req != req, nil
		}
	}
	res, err = Check(ctx, req, st)
	if err != nil || sig == "" {
		return res, false, err
	}
	own := *res
	st.memo.Store(&checkMemo{sig: sig, res: &own})
	return res, false, nil
}

// checkMemo is a NodeState's last answer of CheckReusing.
type checkMemo struct {
	sig string
	res *Result
}

// Build returns the allocation results of a fitting Result, parallel to
// Request.Claims (nil for claims that were already allocated); nil when
// the claims do not fit. Each call returns new objects.
func (r *Result) Build() []*resourceapi.AllocationResult {
	if !r.Fits {
		return nil
	}
	if r.Allocations != nil {
		out := make([]*resourceapi.AllocationResult, len(r.Allocations))
		for i, a := range r.Allocations {
			if a != nil {
				out[i] = a.DeepCopy()
			}
		}
		return out
	}
	out := make([]*resourceapi.AllocationResult, len(r.req.claims))
	r.req.build(out, r.chosen, r.model)
	return out
}

// joinReasons appends more to rs. When rs is empty it returns more itself:
// the memoized reasons of a request (reasonsFor) are then shared by every
// node that gives them, which lets Result.For and its callers work once
// per distinct set of reasons instead of once per node. Shared slices are
// clipped, so an append by a caller copies them.
func joinReasons(rs, more []Reason) []Reason {
	if len(rs) == 0 {
		return slices.Clip(more)
	}
	return append(rs, more...)
}

func finish(r *Result) *Result {
	if !r.Fits {
		r.CapacityAfter = r.CapacityBefore
	}
	r.Score = 100
	if r.CapacityBefore > 0 {
		r.Score = 100 * r.CapacityAfter / r.CapacityBefore
	}
	return r
}

// nodeReasons checks the claims against the node itself: where allocated
// claims are available and which nodes their classes allow.
func (r *Request) nodeReasons(st *NodeState) []Reason {
	var out []Reason
	for i, c := range r.claims {
		if !r.pending[i] {
			alloc := c.Claim.Status.Allocation
			if alloc != nil && !MatchNodeSelector(alloc.AvailableOnNodes, st.node, st.model.node) {
				out = append(out, engine.NewReason(ReasonClaimAllocatedElsewhere, c.Key(), "", nil, "",
					"is allocated and not available on this node"))
			}
			continue
		}
		if sn := c.Class.SuitableNodes; sn != nil && !MatchNodeSelector(sn, st.node, st.model.node) {
			out = append(out, engine.NewReason(ReasonClassNodeMismatch, c.Key(), "", nil, "",
				fmt.Sprintf("class %s does not allow this node (suitableNodes)", c.Class.Name)))
		}
	}
	return out
}

func (r *Request) driverMissing(d string) []Reason {
	var out []Reason
	for _, g := range r.groupByClaim(d, nil) {
		out = append(out, engine.NewReason(ReasonDriverNotOnNode, g.claim, d, g.names, "",
			"the node has no resources of this driver"))
	}
	return out
}

// masks returns, per leaf of dm, the kinds of driver d the leaf matches.
// Unusable leaves match nothing.
func (r *Request) masks(d string, dm *driverModel) []uint64 {
	masks := make([]uint64, len(dm.leaves))
	for k, kd := range r.kinds[d] {
		outs := kd.outcomes(dm)
		for l, o := range outs {
			if o == outcomeTrue && dm.insts[dm.leaves[l]].ok {
				masks[l] |= 1 << k
			}
		}
	}
	return masks
}

// outcomes evaluates the kind against every leaf of dm: the first filter
// or the selector that is not true decides. Results are cached in dm.
func (k *kindOf) outcomes(dm *driverModel) []outcome {
	if v, ok := dm.matches.get(k.key); ok {
		return v
	}
	outs := make([]outcome, len(dm.leaves))
	for l, x := range dm.leaves {
		vars := dm.insts[x].vars
		o := outcomeTrue
		for _, f := range k.filters {
			if o = f.eval(vars); o != outcomeTrue {
				break
			}
		}
		if o == outcomeTrue {
			o = k.sel.eval(vars)
		}
		outs[l] = o
	}
	dm.matches.put(k.key, outs)
	return outs
}

// build fills in the allocation results of the pending claims.
func (r *Request) build(out []*resourceapi.AllocationResult, chosen map[string][]int32, m *Model) {
	for ci, c := range r.claims {
		if !r.pending[ci] {
			continue
		}
		alloc := &resourceapi.AllocationResult{
			AvailableOnNodes: nodeNameSelector(m.node),
		}
		if c.ClaimParameters != nil {
			alloc.Shareable = c.ClaimParameters.Shareable
		}
		for _, d := range claimDrivers(c) {
			var ids []resourceapi.AllocatedResourceInstance
			for i, it := range r.items[d] {
				if it.claim == ci {
					ids = append(ids, resourceapi.AllocatedResourceInstance{ID: m.drivers[d].insts[chosen[d][i]].id})
				}
			}
			if ids == nil {
				ids = []resourceapi.AllocatedResourceInstance{}
			}
			alloc.ResourceHandles = append(alloc.ResourceHandles, resourceapi.ResourceHandle{
				DriverName: d,
				StructuredData: &resourceapi.StructuredResourceHandle{
					VendorClassParameters: vendorSnapshot(c.VendorClassParameters, classVendor(c.ClassParameters)),
					VendorClaimParameters: vendorSnapshot(c.VendorClaimParameters, claimVendor(c.ClaimParameters)),
					NodeName:              m.node,
					Partitionable:         &resourceapi.PartitionableAllocationResult{Instances: ids},
				},
			})
		}
		out[ci] = alloc
	}
}

// claimDrivers lists the drivers of a claim's requests in first-use order.
func claimDrivers(c *Claim) []string {
	var out []string
	if c.ClaimParameters == nil {
		return nil
	}
	for _, req := range c.ClaimParameters.Requests {
		if !slices.Contains(out, req.DriverName) {
			out = append(out, req.DriverName)
		}
	}
	return out
}

func classVendor(p *resourceapi.ResourceClassParameters) *runtime.RawExtension {
	if p == nil {
		return nil
	}
	return p.VendorParameters
}

func claimVendor(p *resourceapi.ResourceClaimParameters) *runtime.RawExtension {
	if p == nil {
		return nil
	}
	return p.VendorParameters
}

func vendorSnapshot(primary, fallback *runtime.RawExtension) *runtime.RawExtension {
	src := primary
	if src == nil {
		src = fallback
	}
	if src == nil {
		return nil
	}
	return src.DeepCopy()
}

// nodeNameSelector is the availableOnNodes of a structured allocation.
func nodeNameSelector(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		}},
	}}}
}
