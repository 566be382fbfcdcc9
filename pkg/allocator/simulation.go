package allocator

import (
	"allot.dev/allot/pkg/allocator/engine"
	"allot.dev/allot/pkg/allocator/internal/layered"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Errors of the simulation API that callers branch on.
var (
	// ErrNodeExists is returned by AddNode for a name already in use.
	ErrNodeExists = errors.New("node already exists")
	// ErrNodeNotFound is returned for operations on an unknown node.
	ErrNodeNotFound = errors.New("node not found")
	// ErrNodeInUse is returned by RemoveNode while pods hold claims
	// allocated on the node; evict them first.
	ErrNodeInUse = errors.New("node has claims in use")
	// ErrDoesNotFit is wrapped by BindPod when the pod's claims do not fit;
	// the error is a *ReasonError with the reasons.
	ErrDoesNotFit = errors.New("pod does not fit")
	// ErrClaimExists is returned by AddClaim for a name already in use.
	ErrClaimExists = errors.New("claim already exists")
)

// NodeFilter is an extra node-level check run by Filter before the
// allocator, such as node selectors and taints. It returns the reasons the
// pod may not run on the node, or none. The scheduler framework does this
// itself and passes no filter.
type NodeFilter func(pod *corev1.Pod, node *corev1.Node) []Reason

// Options configure a simulation.
type Options struct {
	NodeFilter NodeFilter
}

// Simulation is seed 002's autoscaler interface as a library: a cluster
// state that pods can be bound to and evicted from and nodes added to and
// removed from, without touching the real cluster.
//
// A Simulation is not safe for concurrent mutation. Filter only reads and
// may run concurrently with other Filter calls. Clone is O(1) and the clone
// is independent: changes to one are never visible in the other; Clone
// itself counts as a mutation of the receiver. Objects returned by
// accessors are shared; do not modify them.
type Simulation struct {
	opts   Options
	rules  []*resourcev1.DeviceTaintRule // taint the devices of both APIs
	cat    *Catalog
	nodes  *layered.Map[string, *simNode]
	claims *layered.Map[string, *resourceapi.ResourceClaim]

	// resource.k8s.io/v1 (simulationv1.go)
	v1claims *layered.Map[string, *resourcev1.ResourceClaim]
	v1slices *layered.Map[string, *resourcev1.ResourceSlice] // by name
	derived  *simDerived
}

type simNode struct {
	node   *corev1.Node
	slices []*resourceapi.NodeResourceSlice // for the v1 inventory
	state  *NodeState
}

// NewSimulation starts a simulation from a snapshot (seed 002's
// StartSimulation).
func NewSimulation(snap *Snapshot, opts Options) *Simulation {
	s := &Simulation{
		opts:    opts,
		rules:   snap.TaintRules,
		cat:     NewCatalog(snap),
		derived: newSimDerived(),
	}
	claims := make(map[string]*resourceapi.ResourceClaim, len(snap.Claims))
	for _, c := range snap.Claims {
		claims[claimKey(c)] = c
	}
	s.claims = layered.New(claims)
	v1claims := make(map[string]*resourcev1.ResourceClaim, len(snap.V1Claims))
	for _, c := range snap.V1Claims {
		v1claims[c.Namespace+"/"+c.Name] = c
	}
	s.v1claims = layered.New(v1claims)
	v1slices := make(map[string]*resourcev1.ResourceSlice, len(snap.V1Slices))
	for _, sl := range snap.V1Slices {
		v1slices[sl.Name] = sl
	}
	s.v1slices = layered.New(v1slices)
	slicesByNode := map[string][]*resourceapi.NodeResourceSlice{}
	for _, sl := range snap.Slices {
		slicesByNode[sl.Spec.NodeName] = append(slicesByNode[sl.Spec.NodeName], sl)
	}
	claimsByNode := s.allocatedByNode()
	nodes := make(map[string]*simNode, len(snap.Nodes))
	for _, n := range snap.Nodes {
		model := NewModelTainted(n.Name, slicesByNode[n.Name], s.rules)
		nodes[n.Name] = &simNode{node: n, slices: slicesByNode[n.Name], state: NewNodeState(model, n, claimsByNode[n.Name])}
	}
	s.nodes = layered.New(nodes)
	if slices.ContainsFunc(snap.V1Claims, func(c *resourcev1.ResourceClaim) bool { return c.Status.Allocation != nil }) {
		// v1 claims holding seed devices count on the seed states.
		for n, views := range seedViewsByNode(s.v1Inventory(), snap.V1Claims) {
			if sn, ok := s.nodes.Get(n); ok {
				s.nodes.Set(n, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithAllocated(views...)})
			}
		}
	}
	return s
}

// allocatedByNode groups allocated claims by the nodes their structured
// handles name.
func (s *Simulation) allocatedByNode() map[string][]*resourceapi.ResourceClaim {
	out := map[string][]*resourceapi.ResourceClaim{}
	for _, k := range s.claims.Keys() {
		c, _ := s.claims.Get(k)
		for _, n := range AllocatedNodes(c) {
			out[n] = append(out[n], c)
		}
	}
	return out
}

// Clone returns an independent copy in O(1).
func (s *Simulation) Clone() *Simulation {
	return &Simulation{opts: s.opts, rules: s.rules, cat: s.cat, nodes: s.nodes.Clone(), claims: s.claims.Clone(),
		v1claims: s.v1claims.Clone(), v1slices: s.v1slices.Clone(), derived: s.derived}
}

// Nodes returns the names of the nodes, sorted.
func (s *Simulation) Nodes() []string { return s.nodes.Keys() }

// Node returns a node and its current allocation state.
func (s *Simulation) Node(name string) (*corev1.Node, *NodeState, bool) {
	n, ok := s.nodes.Get(name)
	if !ok {
		return nil, nil, false
	}
	return n.node, n.state, true
}

// Claim returns the current state of a claim.
func (s *Simulation) Claim(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	return s.claims.Get(namespace + "/" + name)
}

// Claims returns all claims, sorted by namespace and name.
func (s *Simulation) Claims() []*resourceapi.ResourceClaim {
	keys := s.claims.Keys()
	out := make([]*resourceapi.ResourceClaim, 0, len(keys))
	for _, k := range keys {
		c, _ := s.claims.Get(k)
		out = append(out, c)
	}
	return out
}

// AddNode adds a node with its slices (seed 002's SimulateAddNode). Claims
// already allocated on a node of that name count against it.
func (s *Simulation) AddNode(node *corev1.Node, slices []*resourceapi.NodeResourceSlice) error {
	return s.AddNodeWith(node, slices, nil)
}

// AddNodeWith is AddNode for a node that publishes resource.k8s.io/v1
// ResourceSlices too (their names must be new).
func (s *Simulation) AddNodeWith(node *corev1.Node, slices []*resourceapi.NodeResourceSlice, v1Slices []*resourcev1.ResourceSlice) error {
	if _, ok := s.nodes.Get(node.Name); ok {
		return fmt.Errorf("add node %s: %w", node.Name, ErrNodeExists)
	}
	model := NewModelTainted(node.Name, slices, s.rules)
	s.nodes.Set(node.Name, &simNode{node: node, slices: slices, state: NewNodeState(model, node, s.allocatedByNode()[node.Name])})
	for _, sl := range v1Slices {
		s.v1slices.Set(sl.Name, sl)
	}
	s.nodesChanged()
	if s.v1claims.Len() > 0 {
		if views := seedViewsByNode(s.v1Inventory(), s.V1Claims())[node.Name]; len(views) > 0 {
			sn, _ := s.nodes.Get(node.Name)
			s.nodes.Set(node.Name, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithAllocated(views...)})
		}
	}
	return nil
}

// RemoveNode removes a node (seed 002's SimulateRemoveNode). It fails with
// ErrNodeInUse while claims allocated on the node are reserved for pods;
// evict those pods first. Claims allocated there without consumers stay
// allocated (to a node that no longer exists).
func (s *Simulation) RemoveNode(name string) error {
	if _, ok := s.nodes.Get(name); !ok {
		return fmt.Errorf("remove node %s: %w", name, ErrNodeNotFound)
	}
	var users []string
	for _, c := range s.allocatedByNode()[name] {
		for _, r := range c.Status.ReservedFor {
			users = append(users, fmt.Sprintf("%s/%s (claim %s)", r.Resource, r.Name, claimKey(c)))
		}
	}
	users = append(users, s.v1UsersOn(name)...)
	if len(users) > 0 {
		return fmt.Errorf("remove node %s: %w: %s", name, ErrNodeInUse, strings.Join(users, ", "))
	}
	s.nodes.Del(name)
	for _, k := range s.v1slices.Keys() {
		if sl, _ := s.v1slices.Get(k); sl.Spec.NodeName != nil && *sl.Spec.NodeName == name {
			s.v1slices.Del(k)
		}
	}
	s.nodesChanged()
	return nil
}

// AddClaim adds a claim, such as one generated for a pod.
func (s *Simulation) AddClaim(c *resourceapi.ResourceClaim) error {
	_, v1 := s.v1claims.Get(claimKey(c))
	if _, ok := s.claims.Get(claimKey(c)); ok || v1 {
		return fmt.Errorf("add claim %s: %w", claimKey(c), ErrClaimExists)
	}
	s.claims.Set(claimKey(c), c)
	for _, n := range AllocatedNodes(c) {
		if sn, ok := s.nodes.Get(n); ok {
			s.nodes.Set(n, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithAllocated(c)})
		}
	}
	s.claimsChanged(nil, nil, nil, []*resourceapi.ResourceClaim{c})
	return nil
}

// Prepare resolves and compiles the claims of a pod for Allocate. Claims
// that are missing, or whose parameters are, become pod-level reasons.
// Claims stored as resource.k8s.io/v1 are left out: Filter and BindPod
// allocate them with AllocateV1.
func (s *Simulation) Prepare(pod *corev1.Pod) *Request {
	req, _ := s.prepare(pod)
	return req
}

// prepare is Prepare that also returns the names of the pod's v1 claims.
func (s *Simulation) prepare(pod *corev1.Pod) (*Request, []string) {
	var claims []Claim
	var reasons []Reason
	var v1 []string
	for _, name := range podClaimNames(pod) {
		if name.template != "" {
			msg := fmt.Sprintf("claim for entry %s not generated yet", name.name)
			if s.cat.templates[pod.Namespace+"/"+name.template] == nil && s.cat.V1ClaimTemplate(pod.Namespace, name.template) == nil {
				msg = fmt.Sprintf("claim template %s/%s of entry %s not found", pod.Namespace, name.template, name.name)
			}
			reasons = append(reasons, engine.NewReason(ReasonClaimNotFound, "", "", nil, "", msg))
			continue
		}
		if _, ok := s.v1claims.Get(pod.Namespace + "/" + name.name); ok {
			v1 = append(v1, name.name)
			continue
		}
		c, ok := s.claims.Get(pod.Namespace + "/" + name.name)
		if !ok {
			reasons = append(reasons, engine.NewReason(ReasonClaimNotFound, pod.Namespace+"/"+name.name, "", nil, "", "not found"))
			continue
		}
		resolved, r := s.resolve(c)
		if r != nil {
			reasons = append(reasons, *r)
			continue
		}
		claims = append(claims, resolved)
	}
	req := Prepare(pod, claims)
	req.reasons = append(reasons, req.reasons...)
	return req, v1
}

// resolve resolves a claim for Prepare: missing parameters are a reason
// (the claim's before its class's); a missing class is not, Prepare
// reports it.
func (s *Simulation) resolve(c *resourceapi.ResourceClaim) (Claim, *Reason) {
	resolved, missing := s.cat.Resolve(c)
	for _, m := range missing {
		var msg string
		switch m.Kind {
		case MissingClaimParameters:
			msg = fmt.Sprintf("no ResourceClaimParameters for %s %s", m.RefKind, m.RefName)
		case MissingClassParameters:
			msg = fmt.Sprintf("no ResourceClassParameters for %s %s of class %s", m.RefKind, m.RefName, m.Class)
		default:
			continue
		}
		r := engine.NewReason(ReasonParametersNotFound, m.Claim, "", nil, "", msg)
		return resolved, &r
	}
	return resolved, nil
}

type podClaimName struct {
	name     string
	template string // set when the entry's claim is not generated yet
}

// podClaimNames lists the claims a pod uses: named claims directly, and
// for template entries the claim recorded in the pod's status.
func podClaimNames(pod *corev1.Pod) []podClaimName {
	var out []podClaimName
	for _, pc := range pod.Spec.ResourceClaims {
		switch {
		case pc.ResourceClaimName != nil:
			out = append(out, podClaimName{name: *pc.ResourceClaimName})
		case pc.ResourceClaimTemplateName != nil:
			st := slices.IndexFunc(pod.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == pc.Name })
			switch {
			case st < 0:
				out = append(out, podClaimName{name: pc.Name, template: *pc.ResourceClaimTemplateName})
			case pod.Status.ResourceClaimStatuses[st].ResourceClaimName != nil:
				out = append(out, podClaimName{name: *pod.Status.ResourceClaimStatuses[st].ResourceClaimName})
			}
		}
	}
	return out
}

// Filter decides whether a pod fits on a node (seed 002's PreFilter and
// Filter against the simulated state). It changes nothing.
func (s *Simulation) Filter(ctx context.Context, pod *corev1.Pod, nodeName string) (*Result, error) {
	req, v1 := s.prepare(pod)
	res, _, err := s.filterBoth(ctx, req, s.prepareV1(pod, v1), pod, nodeName)
	return res, err
}

func (s *Simulation) filter(ctx context.Context, req *Request, pod *corev1.Pod, nodeName string) (*Result, error) {
	sn, ok := s.nodes.Get(nodeName)
	if !ok {
		return finish(&Result{Node: nodeName, Reasons: []Reason{
			engine.NewReason(ReasonNodeNotFound, "", "", nil, "", "node not found")}}), nil
	}
	if s.opts.NodeFilter != nil {
		if reasons := s.opts.NodeFilter(pod, sn.node); len(reasons) > 0 {
			return finish(&Result{Node: nodeName, Reasons: reasons, CapacityBefore: sn.state.Capacity()}), nil
		}
	}
	return Allocate(ctx, req, sn.state)
}

// BindPod binds a pod to a node (seed 002's SimulateBindPod): its pending
// claims are allocated there, and every claim is reserved for the pod. When
// the claims do not fit, nothing changes and the error wraps ErrDoesNotFit.
func (s *Simulation) BindPod(ctx context.Context, pod *corev1.Pod, nodeName string) (*Result, error) {
	req, v1 := s.prepare(pod)
	v1req := s.prepareV1(pod, v1)
	res, v1res, err := s.filterBoth(ctx, req, v1req, pod, nodeName)
	if err != nil {
		return nil, fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, nodeName, err)
	}
	if !res.Fits {
		return res, fmt.Errorf("bind pod %s/%s to %s: %w: %w", pod.Namespace, pod.Name, nodeName,
			ErrDoesNotFit, &ReasonError{Reasons: res.Reasons})
	}
	var allocated []*resourceapi.ResourceClaim
	for i, c := range req.Claims() {
		claim := c.Claim.DeepCopy()
		if a := res.Allocations[i]; a != nil {
			claim.Status.Allocation = a
			claim.Status.DriverName = c.Class.DriverName
			if !slices.Contains(claim.Finalizers, resourceapi.DeleteProtectionFinalizer) {
				claim.Finalizers = append(claim.Finalizers, resourceapi.DeleteProtectionFinalizer)
			}
			allocated = append(allocated, claim)
		}
		if !ReservedFor(claim, pod) {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
				Resource: "pods", Name: pod.Name, UID: pod.UID,
			})
		}
		s.claims.Set(c.Key(), claim)
	}
	if len(allocated) > 0 {
		sn, _ := s.nodes.Get(nodeName)
		s.nodes.Set(nodeName, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithAllocated(allocated...)})
		s.claimsChanged(nil, nil, nil, allocated)
	}
	if v1res != nil {
		s.bindV1(pod, nodeName, v1req, v1res)
	}
	return res, nil
}

// EvictPod removes a pod from a node (seed 002's SimulateEvictPod): it is
// removed from its claims' reservedFor, and claims no other pod uses are
// deallocated so the pod can be placed elsewhere. Claims with allocation
// mode Immediate stay allocated, as seed 002 prescribes. nodeName mirrors
// seed 002's signature; the claims themselves say where they are allocated.
func (s *Simulation) EvictPod(pod *corev1.Pod, nodeName string) error {
	var v1 []string
	var freed []*resourceapi.ResourceClaim
	for _, name := range podClaimNames(pod) {
		if name.template != "" {
			continue
		}
		if _, ok := s.v1claims.Get(pod.Namespace + "/" + name.name); ok {
			v1 = append(v1, name.name)
			continue
		}
		old, ok := s.claims.Get(pod.Namespace + "/" + name.name)
		if !ok || !ReservedFor(old, pod) {
			continue
		}
		claim := old.DeepCopy()
		claim.Status.ReservedFor = slices.DeleteFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
			return IsPod(r, pod)
		})
		if len(claim.Status.ReservedFor) == 0 && claim.Status.Allocation != nil &&
			claim.Spec.AllocationMode != resourceapi.AllocationModeImmediate {
			for _, n := range AllocatedNodes(old) {
				if sn, ok := s.nodes.Get(n); ok {
					s.nodes.Set(n, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithoutAllocated(old)})
				}
			}
			freed = append(freed, old)
			claim.Status.Allocation = nil
			claim.Status.DriverName = ""
			claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == resourceapi.DeleteProtectionFinalizer })
		}
		s.claims.Set(claimKey(claim), claim)
	}
	if len(freed) > 0 {
		s.claimsChanged(nil, nil, freed, nil)
	}
	if len(v1) > 0 {
		s.evictV1(pod, v1)
	}
	return nil
}

// GenerateClaims creates the claims of a pod's template entries that do not
// exist yet, as the claim controller does (NewClaimFromTemplate: the
// template's labels, annotations and spec, the entry's annotation, the pod
// as controlling owner) but named POD-ENTRY, since simulated pods often
// have no UID for GeneratedClaimName's suffix, and returns a copy of the
// pod with status.resourceClaimStatuses recording them. An existing claim
// of that name is used as is. Entries whose template does not exist are
// left out; Prepare reports them.
func (s *Simulation) GenerateClaims(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil ||
			slices.ContainsFunc(out.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == pc.Name }) {
			continue
		}
		tmpl := s.cat.templates[pod.Namespace+"/"+*pc.ResourceClaimTemplateName]
		if tmpl == nil {
			s.generateV1(out, pc) // else Prepare reports the missing template
			continue
		}
		name := pod.Name + "-" + pc.Name
		_, v1Exists := s.v1claims.Get(pod.Namespace + "/" + name)
		if _, exists := s.claims.Get(pod.Namespace + "/" + name); !exists && !v1Exists {
			claim := NewClaimFromTemplate(pod, pc.Name, tmpl, name)
			claim.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaim"}
			s.claims.Set(claimKey(claim), claim)
		}
		out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses,
			corev1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr(name)})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
