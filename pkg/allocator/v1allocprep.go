package allocator

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
)

// V1Claim is one resource.k8s.io/v1 claim of a pod.
type V1Claim struct {
	Claim *resourcev1.ResourceClaim
	// AdminNamespace says that the claim's namespace has the label
	// resource.kubernetes.io/admin-access=true, which requests with
	// adminAccess need.
	AdminNamespace bool
}

// V1Request is a pod's v1 claims resolved against their DeviceClasses,
// ready for AllocateV1 on any node. It is read-only and safe for
// concurrent use.
type V1Request struct {
	pod            *corev1.Pod
	claims         []V1Claim
	engine.Request // what the search runs
	reasons        []Reason

	sigOnce    sync.Once // see Signature (v1reuse.go)
	sig        string
	reasonMemo sync.Map // reboundKey -> []Reason (see rebind); shared by the nodes checked in parallel
}

// PrepareV1 resolves a pod's v1 claims. class returns the DeviceClass of a
// name, or nil. Claims are taken once each (by namespace/name), in order;
// AllocateV1's results are parallel to Claims. Problems that hold on every
// node are collected in Unresolvable.
//
// Like the API server's defaulting, an empty allocationMode is ExactCount
// and a count of 0 is 1.
func PrepareV1(pod *corev1.Pod, claims []V1Claim, class func(name string) *resourcev1.DeviceClass) *V1Request {
	r := &V1Request{pod: pod}
	seen := map[string]bool{}
	for _, c := range claims {
		if c.Claim == nil {
			continue
		}
		key := c.Claim.Namespace + "/" + c.Claim.Name
		if seen[key] {
			continue
		}
		seen[key] = true
		ci := len(r.claims)
		r.claims = append(r.claims, c)
		r.Keys = append(r.Keys, key)
		pending, reasons := r.checkClaim(c.Claim, key)
		r.Pending = append(r.Pending, pending)
		r.Reqs = append(r.Reqs, nil)
		r.Cons = append(r.Cons, nil)
		r.reasons = append(r.reasons, reasons...)
		if pending && len(reasons) == 0 {
			r.reasons = append(r.reasons, r.resolve(ci, c, key, class)...)
		}
	}
	return r
}

// Claims returns the claims in the order of V1Result.Allocations.
func (r *V1Request) Claims() []V1Claim { return r.claims }

// Unresolvable returns the reasons why the pod fits no node at all.
func (r *V1Request) Unresolvable() []Reason { return r.reasons }

// checkClaim decides whether a claim needs allocating and whether the pod
// may use it. v1 claims are always shareable, up to 256 consumers.
func (r *V1Request) checkClaim(c *resourcev1.ResourceClaim, key string) (pending bool, reasons []Reason) {
	if c.DeletionTimestamp != nil {
		return false, []Reason{engine.NewReason(ReasonClaimDeleted, key, "", nil, "", "is being deleted")}
	}
	if c.Status.Allocation == nil {
		return true, nil
	}
	if v1ReservedFor(c, r.pod) {
		return false, nil
	}
	if n := len(c.Status.ReservedFor); n >= resourcev1.ResourceClaimReservedForMaxSize {
		return false, []Reason{engine.NewReason(ReasonClaimReservedForFull, key, "", nil, "",
			fmt.Sprintf("already has %d consumers, the maximum", n))}
	}
	return false, nil
}

// v1ReservedFor reports whether the claim's reservedFor names the pod: by
// UID when both have one, else by name.
func v1ReservedFor(c *resourcev1.ResourceClaim, pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	return slices.ContainsFunc(c.Status.ReservedFor, func(ref resourcev1.ResourceClaimConsumerReference) bool {
		if ref.Resource != "pods" || ref.APIGroup != "" {
			return false
		}
		if ref.UID != "" && pod.UID != "" {
			return ref.UID == pod.UID
		}
		return ref.Name == pod.Name
	})
}

// resolve compiles the requests and constraints of a pending claim.
func (r *V1Request) resolve(ci int, c V1Claim, key string, class func(string) *resourcev1.DeviceClass) []Reason {
	var reasons []Reason
	spec := &c.Claim.Spec.Devices
	minDevices := 0
	for i := range spec.Requests {
		dr := &spec.Requests[i]
		req := engine.Req{Claim: ci, Name: dr.Name, First: len(dr.FirstAvailable) > 0}
		bad := func(code ReasonCode, alt, clause, detail string) {
			reasons = append(reasons, engine.NewReason(code, key, "", []string{alt}, clause, detail))
		}
		if (dr.Exactly == nil) == (len(dr.FirstAvailable) == 0) {
			bad(ReasonInvalidParameters, dr.Name, "", "exactly one of exactly and firstAvailable must be set")
			continue
		}
		if e := dr.Exactly; e != nil {
			admin := e.AdminAccess != nil && *e.AdminAccess
			if admin && !c.AdminNamespace {
				bad(ReasonAdminAccessDenied, dr.Name, "", fmt.Sprintf(
					"adminAccess needs the label %s=true on namespace %s", resourcev1.DRAAdminNamespaceLabelKey, c.Claim.Namespace))
			}
			if len(e.DerivedAttributes) > 0 {
				bad(ReasonInvalidParameters, dr.Name, "", "derivedAttributes need DRADerivedAttributes, which is off")
			}
			req.Alts = append(req.Alts, engine.Alt{Name: dr.Name, Admin: admin, Tolerations: e.Tolerations, CapReqs: engine.CapacityRequests(e.Capacity)})
			reasons = append(reasons, r.resolveAlt(&req.Alts[0], key, e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, class)...)
		}
		for j := range dr.FirstAvailable {
			sr := &dr.FirstAvailable[j]
			name := dr.Name + "/" + sr.Name
			if len(sr.DerivedAttributes) > 0 {
				bad(ReasonInvalidParameters, name, "", "derivedAttributes need DRADerivedAttributes, which is off")
			}
			req.Alts = append(req.Alts, engine.Alt{Name: name, Tolerations: sr.Tolerations, CapReqs: engine.CapacityRequests(sr.Capacity)})
			reasons = append(reasons, r.resolveAlt(&req.Alts[j], key, sr.DeviceClassName, sr.Selectors, sr.AllocationMode, sr.Count, class)...)
		}
		least := resourcev1.AllocationResultsMaxSize + 1
		for _, a := range req.Alts {
			least = min(least, max(a.Count, 1))
		}
		minDevices += least
		r.Reqs[ci] = append(r.Reqs[ci], req)
	}
	if minDevices > resourcev1.AllocationResultsMaxSize {
		reasons = append(reasons, engine.NewReason(ReasonTooManyDevices, key, "", nil, "", fmt.Sprintf(
			"needs at least %d devices; a claim holds at most %d", minDevices, resourcev1.AllocationResultsMaxSize)))
	}
	for i, dc := range spec.Constraints {
		cons := engine.Constraint{Requests: dc.Requests}
		switch {
		case dc.MatchAttribute != nil && dc.DistinctAttribute == nil:
			cons.Match, cons.Attr = true, *dc.MatchAttribute
			cons.Clause = "matchAttribute: " + string(cons.Attr)
		case dc.DistinctAttribute != nil && dc.MatchAttribute == nil:
			cons.Attr = *dc.DistinctAttribute
			cons.Clause = "distinctAttribute: " + string(cons.Attr)
		default:
			reasons = append(reasons, engine.NewReason(ReasonInvalidParameters, key, "", nil, "",
				fmt.Sprintf("constraints[%d] must set exactly one of matchAttribute and distinctAttribute", i)))
			continue
		}
		if len(dc.Requests) > 0 {
			cons.Clause += " (requests " + strings.Join(dc.Requests, ", ") + ")"
		}
		r.Cons[ci] = append(r.Cons[ci], cons)
	}
	return reasons
}

// resolveAlt fills in an alternative's class, selectors and count.
func (r *V1Request) resolveAlt(a *engine.Alt, key, className string, sels []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode,
	count int64, class func(string) *resourcev1.DeviceClass) []Reason {
	var reasons []Reason
	bad := func(code ReasonCode, clause, detail string) {
		reasons = append(reasons, engine.NewReason(code, key, "", []string{a.Name}, clause, detail))
	}
	switch mode {
	case "", resourcev1.DeviceAllocationModeExactCount:
		switch {
		case count == 0:
			a.Count = 1
		case count < 0:
			bad(ReasonInvalidParameters, "", fmt.Sprintf("count %d is not positive", count))
		case count > resourcev1.AllocationResultsMaxSize:
			bad(ReasonTooManyDevices, "", fmt.Sprintf("count %d is more than a claim can hold (%d)", count, resourcev1.AllocationResultsMaxSize))
		default:
			a.Count = int(count)
		}
	case resourcev1.DeviceAllocationModeAll:
		a.All = true
	default:
		bad(ReasonInvalidParameters, "", fmt.Sprintf("unknown allocationMode %q", mode))
	}
	for j, s := range sels {
		if s.CEL == nil {
			bad(ReasonInvalidParameters, "", fmt.Sprintf("selectors[%d] has no CEL expression (unknown selector type)", j))
			continue
		}
		if err := engine.SelectorCompiles(s.CEL.Expression); err != nil {
			bad(ReasonInvalidSelector, s.CEL.Expression, fmt.Sprintf("selectors[%d]: %v", j, err))
			continue
		}
		a.Sel = append(a.Sel, s.CEL.Expression)
	}
	if className == "" {
		bad(ReasonInvalidParameters, "", "no deviceClassName")
		return reasons
	}
	a.Class = class(className)
	if a.Class == nil {
		bad(ReasonClassNotFound, "", fmt.Sprintf("device class %q not found", className))
		return reasons
	}
	for j, s := range a.Class.Spec.Selectors {
		if s.CEL == nil {
			bad(ReasonInvalidParameters, "", fmt.Sprintf("device class %s: selectors[%d] has no CEL expression (unknown selector type)", className, j))
			continue
		}
		if err := engine.SelectorCompiles(s.CEL.Expression); err != nil {
			bad(ReasonInvalidSelector, s.CEL.Expression, fmt.Sprintf("device class %s: selectors[%d]: %v", className, j, err))
			continue
		}
		a.ClassSel = append(a.ClassSel, s.CEL.Expression)
	}
	return reasons
}

// nodeReasons checks the claims that are already allocated against the
// node: their nodeSelector must match it.
func (r *V1Request) nodeReasons(node *corev1.Node) []Reason {
	var out []Reason
	for i, c := range r.claims {
		if r.Pending[i] {
			continue
		}
		alloc := c.Claim.Status.Allocation
		if alloc == nil || alloc.NodeSelector == nil {
			continue
		}
		sel, _ := invConvertNodeSelector(alloc.NodeSelector)
		name, labels := "", map[string]string(nil)
		if node != nil {
			name, labels = node.Name, node.Labels
		}
		if !sel.Matches(name, labels) {
			out = append(out, engine.NewReason(ReasonClaimAllocatedElsewhere, r.Keys[i], "", nil, "",
				"is allocated and not available on this node"))
		}
	}
	return out
}
