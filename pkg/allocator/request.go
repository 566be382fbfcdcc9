package allocator

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	"k8s.io/apimachinery/pkg/runtime"
)

// Claim is one claim of a pod with the objects needed to allocate it,
// already resolved by the caller (see Simulation for the resolution rules).
type Claim struct {
	Claim *resourceapi.ResourceClaim
	Class *resourceapi.ResourceClass
	// ClassParameters holds the class's filters; nil means none.
	ClassParameters *resourceapi.ResourceClassParameters
	// ClaimParameters holds the requests; nil means the claim asks for
	// nothing (it is allocated to the node without instances).
	ClaimParameters *resourceapi.ResourceClaimParameters
	// VendorClassParameters and VendorClaimParameters are the snapshots
	// stored in each resource handle. When nil, the VendorParameters of
	// ClassParameters and ClaimParameters are used.
	VendorClassParameters *runtime.RawExtension
	VendorClaimParameters *runtime.RawExtension
}

// Key returns "namespace/name" of the claim.
func (c *Claim) Key() string { return claimKey(c.Claim) }

func claimKey(c *resourceapi.ResourceClaim) string {
	if c == nil {
		return ""
	}
	return c.Namespace + "/" + c.Name
}

// hasKey reports whether key is the claim's Key, without building it.
func (c *Claim) hasKey(key string) bool {
	if c.Claim == nil {
		return key == ""
	}
	ns, name := c.Claim.Namespace, c.Claim.Name
	return len(key) == len(ns)+1+len(name) && key[len(ns)] == '/' && key[:len(ns)] == ns && key[len(ns)+1:] == name
}

// Request is a pod's claims compiled for allocation. Prepare it once per
// pod (per scheduling cycle) and call Allocate for each node; it is
// read-only and safe for concurrent use.
type Request struct {
	pod     *corev1.Pod
	claims  []*Claim
	pending []bool               // per claim: needs allocating
	drivers []string             // drivers with items, sorted
	items   map[string][]item    // per driver
	kinds   map[string][]*kindOf // per driver
	reasons []Reason             // pod-level: the pod fits no node

	reasonMemo sync.Map // reasonKey, reboundKey -> []Reason; shared by the nodes checked in parallel

	sigOnce sync.Once
	sig     string
}

// item is one required instance of one claim.
type item struct {
	claim  int
	driver string
	name   string
	kind   int
}

// kindOf is a distinct predicate: class filters plus a request selector.
// Items with equal kinds are interchangeable.
type kindOf struct {
	key     string
	filters []*selector
	class   string
	sel     *selector
}

// Prepare compiles the claims of a pod. Problems that hold on every node
// (a claim in use by another pod, an invalid selector) are returned by
// Unresolvable and make Allocate reject every node.
func Prepare(pod *corev1.Pod, claims []Claim) *Request {
	r := &Request{pod: pod, items: map[string][]item{}, kinds: map[string][]*kindOf{}}
	seen := map[string]bool{}
	for i := range claims {
		c := new(Claim)
		*c = claims[i]
		if c.Claim == nil || seen[c.Key()] {
			continue
		}
		seen[c.Key()] = true
		idx := len(r.claims)
		r.claims = append(r.claims, c)
		pending, reasons := r.checkClaim(c)
		r.pending = append(r.pending, pending)
		r.reasons = append(r.reasons, reasons...)
		if pending && len(reasons) == 0 {
			r.reasons = append(r.reasons, r.addItems(idx, c)...)
		}
	}
	for d := range r.items {
		r.drivers = append(r.drivers, d)
	}
	slices.Sort(r.drivers)
	return r
}

// Unresolvable returns the reasons why the pod fits no node at all.
func (r *Request) Unresolvable() []Reason { return r.reasons }

// Claims returns the prepared claims, in the order of Result.Allocations.
func (r *Request) Claims() []*Claim { return r.claims }

// Signature is equal for two requests exactly when Check answers them
// alike on every node state, apart from the names of their claims (see
// Result.For): the same classes at the same resourceVersion and, per
// driver, the same predicates and the same requests of the same claims in
// the same order. It is "" for a request whose answers are not to be
// shared: one with pod-level reasons, a claim that is already allocated
// (its allocation and reservations are its own), or a class without a
// resourceVersion to tell its versions apart.
func (r *Request) Signature() string {
	r.sigOnce.Do(func() { r.sig = intern(r.signature()) })
	return r.sig
}

// signatures interns signatures: equal ones share their bytes, so that
// comparing them, as CheckReusing does on every node, compares pointers.
var signatures struct {
	sync.Mutex
	m map[string]string
}

func intern(s string) string {
	if s == "" {
		return s
	}
	signatures.Lock()
	defer signatures.Unlock()
	if v, ok := signatures.m[s]; ok {
		return v
	}
	if signatures.m == nil || len(signatures.m) >= 4096 {
		signatures.m = map[string]string{} // templates and classes change: start over
	}
	signatures.m[s] = s
	return s
}

func (r *Request) signature() string {
	if len(r.reasons) > 0 || len(r.claims) == 0 {
		return ""
	}
	var b strings.Builder
	for i, c := range r.claims {
		if !r.pending[i] || c.Class == nil || c.Class.ResourceVersion == "" {
			return ""
		}
		fmt.Fprintf(&b, "c%q%q%q;", c.Class.Name, c.Class.UID, c.Class.ResourceVersion)
	}
	for _, d := range r.drivers {
		fmt.Fprintf(&b, "d%q", d)
		for _, k := range r.kinds[d] {
			fmt.Fprintf(&b, "k%q%q", k.key, k.class)
		}
		for _, it := range r.items[d] {
			fmt.Fprintf(&b, "i%d,%d,%q", it.claim, it.kind, it.name)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// reboundKey is the content of one reason of a request with r's
// Signature, by the position of its claim: answers kept for many earlier
// requests (see CheckReusing) say the same of many nodes, and r renames
// each such reason once.
type reboundKey struct {
	code                   ReasonCode
	claim                  int
	driver, clause, detail string
	requests               [4]string
	n                      int
}

// rebind returns reasons of a Check of request from, which has the same
// Signature as r, naming r's claims instead of from's. Claims are matched
// by position. A single reason comes back as a slice shared by every
// caller with a reason of the same content, so that they can share what
// they make of it too; no result may be modified.
func (r *Request) rebind(from *Request, reasons []Reason) []Reason {
	return rebindReasons(&r.reasonMemo, reasons, func(claim string) (string, int) {
		j := slices.IndexFunc(from.claims, func(c *Claim) bool { return c.hasKey(claim) })
		if j < 0 {
			return "", -1
		}
		return r.claims[j].Key(), j
	})
}

// rebindReasons renames the claims reasons name, of a request's answer
// taken for another request of the same signature (Request.rebind,
// V1Request.rebind): rename gives, for a claim of the answer's request,
// the other request's claim at the same position and that position, or
// -1 to leave the reason as it is. One renamed reason is kept in memo
// (the other request's), by content, so that every node answered alike
// shares one slice.
func rebindReasons(memo *sync.Map, reasons []Reason, rename func(claim string) (string, int)) []Reason {
	switch len(reasons) {
	case 0:
		return nil
	case 1:
		return rebound(memo, reasons[0], rename)
	}
	out := make([]Reason, len(reasons))
	for i, x := range reasons {
		out[i] = rebound(memo, x, rename)[0]
	}
	return out
}

// rebound is rebindReasons of one reason, as a one-element slice.
func rebound(memo *sync.Map, x Reason, rename func(claim string) (string, int)) []Reason {
	if x.Claim == "" {
		return []Reason{x}
	}
	to, j := rename(x.Claim)
	if j < 0 {
		return []Reason{x}
	}
	if len(x.Requests) > len(reboundKey{}.requests) {
		return []Reason{engine.NewReason(x.Code, to, x.Driver, x.Requests, x.Clause, x.Detail())}
	}
	k := reboundKey{code: x.Code, claim: j, driver: x.Driver, clause: x.Clause, detail: x.Detail(), n: len(x.Requests)}
	copy(k.requests[:], x.Requests)
	if v, ok := memo.Load(k); ok {
		return v.([]Reason)
	}
	v, _ := memo.LoadOrStore(k, []Reason{engine.NewReason(x.Code, to, x.Driver, x.Requests, x.Clause, x.Detail())})
	return v.([]Reason)
}

// checkClaim decides whether a claim still needs allocating and whether the
// pod may use it at all.
func (r *Request) checkClaim(c *Claim) (pending bool, reasons []Reason) {
	key := c.Key()
	claim := c.Claim
	if claim.DeletionTimestamp != nil {
		return false, []Reason{engine.NewReason(ReasonClaimDeleted, key, "", nil, "", "is being deleted")}
	}
	if c.Class == nil {
		return false, []Reason{engine.NewReason(ReasonClassNotFound, key, "", nil, "",
			fmt.Sprintf("resource class %q not found", claim.Spec.ResourceClassName))}
	}
	if c.Class.ControllerName != "" {
		return false, []Reason{engine.NewReason(ReasonNotStructured, key, "", nil, "",
			fmt.Sprintf("class %s is allocated by controller %s, not by structured parameters", c.Class.Name, c.Class.ControllerName))}
	}
	reserved := ReservedFor(claim, r.pod)
	alloc := claim.Status.Allocation
	switch {
	case alloc == nil:
		return true, nil
	case reserved:
		return false, nil
	case !alloc.Shareable && len(claim.Status.ReservedFor) > 0:
		return false, []Reason{engine.NewReason(ReasonClaimInUse, key, "", nil, "",
			fmt.Sprintf("is not shareable and in use by %s", consumerNames(claim)))}
	case len(claim.Status.ReservedFor) >= resourceapi.ResourceClaimReservedForMaxSize:
		return false, []Reason{engine.NewReason(ReasonClaimReservedForFull, key, "", nil, "",
			fmt.Sprintf("already has %d consumers, the maximum", len(claim.Status.ReservedFor)))}
	}
	return false, nil
}

// ReservedFor reports whether the claim's reservedFor names the pod (see
// IsPod); false for a nil pod.
func ReservedFor(c *resourceapi.ResourceClaim, pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	return slices.ContainsFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
		return IsPod(r, pod)
	})
}

// IsPod reports whether a consumer reference names the pod: by UID when
// both have one, else by name (simulated pods often have no UID).
func IsPod(r resourceapi.ResourceClaimConsumerReference, pod *corev1.Pod) bool {
	if r.Resource != "pods" || r.APIGroup != "" {
		return false
	}
	if r.UID != "" && pod.UID != "" {
		return r.UID == pod.UID
	}
	return r.Name == pod.Name
}

func consumerNames(c *resourceapi.ResourceClaim) string {
	names := make([]string, 0, len(c.Status.ReservedFor))
	for _, ref := range c.Status.ReservedFor {
		names = append(names, ref.Resource+"/"+ref.Name)
	}
	return strings.Join(names, ", ")
}

// addItems adds the required instances of a pending claim.
func (r *Request) addItems(idx int, c *Claim) []Reason {
	if c.ClaimParameters == nil {
		return nil
	}
	key := c.Key()
	var reasons []Reason
	for i, req := range c.ClaimParameters.Requests {
		if req.Partitionable == nil {
			reasons = append(reasons, engine.NewReason(ReasonInvalidParameters, key, req.DriverName, nil, "",
				fmt.Sprintf("requests[%d] uses no model this allocator knows (partitionable)", i)))
			continue
		}
		filters, fsrc, err := classFilters(c.ClassParameters, req.DriverName)
		if err != nil {
			reasons = append(reasons, engine.NewReason(ReasonInvalidSelector, key, req.DriverName, nil, fsrc, err.Error()))
			continue
		}
		for j, p := range req.Partitionable.Required {
			name := p.Name
			if name == "" {
				name = fmt.Sprintf("requests[%d].required[%d]", i, j)
			}
			sel, err := compileSelector(p.Selector)
			if err != nil {
				reasons = append(reasons, engine.NewReason(ReasonInvalidSelector, key, req.DriverName, []string{name}, p.Selector, err.Error()))
				continue
			}
			k, err := r.kind(req.DriverName, filters, fsrc, c.Class.Name, sel)
			if err != nil {
				reasons = append(reasons, engine.NewReason(ReasonInvalidParameters, key, req.DriverName, []string{name}, "", err.Error()))
				continue
			}
			r.items[req.DriverName] = append(r.items[req.DriverName], item{claim: idx, driver: req.DriverName, name: name, kind: k})
		}
	}
	return reasons
}

// classFilters compiles the class parameters' filters for one driver.
func classFilters(p *resourceapi.ResourceClassParameters, driver string) ([]*selector, string, error) {
	if p == nil {
		return nil, "", nil
	}
	var out []*selector
	var srcs []string
	for _, f := range p.Filters {
		if f.DriverName != driver || f.Partitionable == nil {
			continue
		}
		sel, err := compileSelector(f.Partitionable.Selector)
		if err != nil {
			return nil, f.Partitionable.Selector, fmt.Errorf("class parameters %s: filter: %w", p.Name, err)
		}
		out = append(out, sel)
		srcs = append(srcs, f.Partitionable.Selector)
	}
	return out, strings.Join(srcs, "\x00"), nil
}

// kind returns the index of the predicate (filters, sel) for a driver,
// adding it if new.
func (r *Request) kind(driver string, filters []*selector, fsrc, class string, sel *selector) (int, error) {
	key := fsrc + "\x01" + sel.src
	for i, k := range r.kinds[driver] {
		if k.key == key {
			return i, nil
		}
	}
	if len(r.kinds[driver]) >= maxKinds {
		return 0, fmt.Errorf("more than %d distinct selectors for one driver", maxKinds)
	}
	r.kinds[driver] = append(r.kinds[driver], &kindOf{key: key, filters: filters, class: class, sel: sel})
	return len(r.kinds[driver]) - 1, nil
}
