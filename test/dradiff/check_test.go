package dradiff

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

// The checker: is a set of allocation results for the pod's claims valid
// on the node? It is written from the API's documented rules (the field
// comments of k8s.io/api/resource/v1) and calls neither allot's allocator
// nor upstream's; only selector evaluation is borrowed, from upstream's cel
// package. Both sides' results go through it, so a checker bug shows up as
// upstream "failing" it too.
//
// Where the documentation is silent, the rule taken is noted:
//   - pools: only the highest generation of a pool counts; a pool is usable
//     when it has as many slices of that generation as resourceSliceCount
//     says, device names are unique in it, counter set names are unique,
//     and every consumed counter exists;
//   - allocation mode All: every device of the pools the node can use that
//     matches the class and the request, and none of the pools that reach
//     the node (a slice or device of the current generation is available on
//     it) may be incomplete or invalid. Upstream's stable variant also
//     counts a pool whose shared counters it reads for any node (and then
//     judges validity only from the slices it looked at); the incubating
//     variant does not. The checker takes neither quirk: the comparison of
//     fits shows where allot follows one;
//   - admin access: such a result "ignores all ordinary claims to the
//     device ... and any resource allocations", so it may take a device
//     already allocated or used by another claim of the pod, and does not
//     take from shared counters; one claim still names a device only once;
//   - taints with effect NoSchedule or NoExecute must be tolerated by the
//     request; None and unknown effects do not matter.

// cdev is a device of the current generation of its pool.
type cdev struct {
	id    Hole
	dev   *resourcev1.Device
	slice *resourcev1.ResourceSlice
}

// cpool is a pool as the checker understands it.
type cpool struct {
	key        poolKey
	generation int64
	slices     []*resourcev1.ResourceSlice
	incomplete string
	invalid    string
	devices    map[string]*cdev
	counters   map[string]map[string]resource.Quantity
}

func (p *cpool) usable() bool { return p.incomplete == "" && p.invalid == "" }

func checkerPools(c *Case) map[poolKey]*cpool {
	gens := poolGenerations(c.Slices)
	pools := map[poolKey]*cpool{}
	for _, s := range c.Slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation != gens[k] {
			continue
		}
		p := pools[k]
		if p == nil {
			p = &cpool{key: k, generation: gens[k], devices: map[string]*cdev{}, counters: map[string]map[string]resource.Quantity{}}
			pools[k] = p
		}
		p.slices = append(p.slices, s)
	}
	for _, p := range pools {
		if want := p.slices[0].Spec.Pool.ResourceSliceCount; int64(len(p.slices)) != want {
			p.incomplete = fmt.Sprintf("%d of %d slices", len(p.slices), want)
		}
		for _, s := range p.slices {
			if len(s.Spec.Devices) > 0 && len(s.Spec.SharedCounters) > 0 {
				p.invalid = "slice " + s.Name + " has devices and shared counters"
			}
			for _, cs := range s.Spec.SharedCounters {
				if _, dup := p.counters[cs.Name]; dup {
					p.invalid = "duplicate counter set " + cs.Name
				}
				p.counters[cs.Name] = map[string]resource.Quantity{}
				for n, v := range cs.Counters {
					p.counters[cs.Name][n] = v.Value
				}
			}
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if _, dup := p.devices[d.Name]; dup {
					p.invalid = "duplicate device " + d.Name
				}
				p.devices[d.Name] = &cdev{id: Hole{p.key.driver, p.key.pool, d.Name}, dev: d, slice: s}
			}
		}
		for _, d := range p.devices {
			for _, cc := range d.dev.ConsumesCounters {
				set, ok := p.counters[cc.CounterSet]
				if !ok {
					p.invalid = "device " + d.id.Device + " consumes from unknown counter set " + cc.CounterSet
					continue
				}
				for n := range cc.Counters {
					if _, ok := set[n]; !ok {
						p.invalid = "device " + d.id.Device + " consumes unknown counter " + n
					}
				}
			}
		}
	}
	return pools
}

// nodeSelectorMatches implements core/v1 NodeSelector: terms are ORed,
// requirements of a term ANDed, an empty term matches nothing.
func nodeSelectorMatches(sel *k8scorev1.NodeSelector, node *k8scorev1.Node) bool {
	for _, t := range sel.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, r := range t.MatchExpressions {
			v, has := node.Labels[r.Key]
			ok = ok && requirementMatches(r, v, has)
		}
		for _, r := range t.MatchFields {
			if r.Key != "metadata.name" {
				ok = false
				continue
			}
			ok = ok && requirementMatches(r, node.Name, true)
		}
		if ok {
			return true
		}
	}
	return false
}

func requirementMatches(r k8scorev1.NodeSelectorRequirement, v string, has bool) bool {
	switch r.Operator {
	case k8scorev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, v)
	case k8scorev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, v)
	case k8scorev1.NodeSelectorOpExists:
		return has
	case k8scorev1.NodeSelectorOpDoesNotExist:
		return !has
	case k8scorev1.NodeSelectorOpGt, k8scorev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(v, 10, 64)
		b, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == k8scorev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}

// availableOn: the device's own node selection with perDeviceNodeSelection,
// else its slice's.
func (d *cdev) availableOn(node *k8scorev1.Node) bool {
	name, sel, all := d.slice.Spec.NodeName, d.slice.Spec.NodeSelector, d.slice.Spec.AllNodes
	if ptr.Deref(d.slice.Spec.PerDeviceNodeSelection, false) {
		name, sel, all = d.dev.NodeName, d.dev.NodeSelector, d.dev.AllNodes
	}
	switch {
	case name != nil:
		return *name == node.Name
	case ptr.Deref(all, false):
		return true
	case sel != nil:
		return nodeSelectorMatches(sel, node)
	}
	return false
}

// reaches: the pool matters on the node (see the rule for All above).
func (p *cpool) reaches(node *k8scorev1.Node) bool {
	for _, s := range p.slices {
		if ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
			continue
		}
		if (&cdev{slice: s}).availableOn(node) {
			return true
		}
	}
	for _, d := range p.devices {
		if d.availableOn(node) {
			return true
		}
	}
	return false
}

// effReq is a request or sub-request as the checker needs it.
type effReq struct {
	name        string // "r" or "r/s"
	class       string
	selectors   []resourcev1.DeviceSelector
	mode        resourcev1.DeviceAllocationMode
	count       int64
	admin       bool
	tolerations []resourcev1.DeviceToleration
	capacity    *resourcev1.CapacityRequirements
}

func exactReq(r *resourcev1.DeviceRequest) effReq {
	e := r.Exactly
	return effReq{r.Name, e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, ptr.Deref(e.AdminAccess, false), e.Tolerations, e.Capacity}
}

func subReq(r *resourcev1.DeviceRequest, s *resourcev1.DeviceSubRequest) effReq {
	return effReq{r.Name + "/" + s.Name, s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, false, s.Tolerations, s.Capacity}
}

func (e effReq) exactCount() int64 {
	if e.mode == "" || e.mode == resourcev1.DeviceAllocationModeExactCount {
		if e.count == 0 {
			return 1
		}
		return e.count
	}
	return -1
}

// selectorMatch evaluates CEL selectors on a device with upstream's cel
// package.
func selectorMatch(sels []resourcev1.DeviceSelector, d *cdev) (bool, error) {
	for _, s := range sels {
		if s.CEL == nil {
			return false, fmt.Errorf("selector without CEL")
		}
		expr := celCache.GetOrCompile(s.CEL.Expression)
		if expr.Error != nil {
			return false, fmt.Errorf("compile %q: %v", s.CEL.Expression, expr.Error)
		}
		ok, _, err := expr.DeviceMatches(context.Background(), cel.Device{Driver: d.id.Driver, Attributes: d.dev.Attributes, Capacity: d.dev.Capacity})
		if err != nil {
			return false, fmt.Errorf("evaluate %q on %s: %v", s.CEL.Expression, d.id, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// matches: class selectors and the request's selectors.
func (c *Case) matches(e effReq, d *cdev) (bool, error) {
	class := c.class(e.class)
	if class == nil {
		return false, fmt.Errorf("class %s not found", e.class)
	}
	ok, err := selectorMatch(class.Spec.Selectors, d)
	if err != nil || !ok {
		return false, err
	}
	return selectorMatch(e.selectors, d)
}

func tolerates(t resourcev1.DeviceToleration, taint resourcev1.DeviceTaint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case resourcev1.DeviceTolerationOpExists:
		return true
	case "", resourcev1.DeviceTolerationOpEqual:
		return t.Value == taint.Value
	}
	return false
}

func untoleratedTaint(d *resourcev1.Device, tols []resourcev1.DeviceToleration) *resourcev1.DeviceTaint {
	for i, taint := range d.Taints {
		if taint.Effect != resourcev1.DeviceTaintEffectNoSchedule && taint.Effect != resourcev1.DeviceTaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tols, func(t resourcev1.DeviceToleration) bool { return tolerates(t, taint) }) {
			return &d.Taints[i]
		}
	}
	return nil
}

// lookupAttr finds a fully qualified attribute: as written, or for the
// driver's own domain also under its bare ID.
func lookupAttr(d *cdev, name resourcev1.FullyQualifiedName) *resourcev1.DeviceAttribute {
	if a, ok := d.dev.Attributes[resourcev1.QualifiedName(name)]; ok {
		return &a
	}
	dom, id, ok := strings.Cut(string(name), "/")
	if ok && dom == d.id.Driver {
		if a, ok := d.dev.Attributes[resourcev1.QualifiedName(id)]; ok {
			return &a
		}
	}
	return nil
}

// attrKey renders an attribute value with its type, so that values of
// different types never compare equal.
func attrKey(a *resourcev1.DeviceAttribute) string {
	switch {
	case a.IntValue != nil:
		return fmt.Sprintf("int:%d", *a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprintf("bool:%t", *a.BoolValue)
	case a.StringValue != nil:
		return "string:" + *a.StringValue
	case a.VersionValue != nil:
		return "version:" + *a.VersionValue
	}
	return "?"
}

// checker is the validity check of one case on one node.
type checker struct {
	c     *Case
	pools map[poolKey]*cpool
	node  *k8scorev1.Node
}

func newChecker(c *Case, node *k8scorev1.Node) *checker {
	return &checker{c: c, pools: checkerPools(c), node: node}
}

func (k *checker) device(id Hole) (*cdev, *cpool) {
	p := k.pools[poolKey{id.Driver, id.Pool}]
	if p == nil {
		return nil, nil
	}
	return p.devices[id.Device], p
}

// allSet is the set of devices an allocation mode All request must get on
// the node, or why no set satisfies it.
func (k *checker) allSet(e effReq) (map[Hole]bool, string) {
	set := map[Hole]bool{}
	for _, p := range k.pools {
		if !p.reaches(k.node) {
			continue
		}
		if !p.usable() {
			return nil, fmt.Sprintf("pool %s/%s reaches the node but is not usable (%s%s)", p.key.driver, p.key.pool, p.incomplete, p.invalid)
		}
		for _, d := range p.devices {
			if !d.availableOn(k.node) {
				continue
			}
			ok, err := k.c.matches(e, d)
			if err != nil {
				return nil, err.Error()
			}
			if _, serves := servesCapacity(e, d); ok && serves {
				set[d.id] = true
			}
		}
	}
	if len(set) == 0 {
		return nil, "no device matches"
	}
	return set, ""
}

// requestOf resolves a result's request name in the claim.
func requestOf(claim *resourcev1.ResourceClaim, name string) (effReq, *resourcev1.DeviceRequest, string) {
	base, sub, isSub := strings.Cut(name, "/")
	for i := range claim.Spec.Devices.Requests {
		r := &claim.Spec.Devices.Requests[i]
		if r.Name != base {
			continue
		}
		if len(r.FirstAvailable) == 0 {
			if isSub {
				return effReq{}, nil, "names a sub-request of a request without firstAvailable"
			}
			return exactReq(r), r, ""
		}
		if !isSub {
			return effReq{}, nil, "names a firstAvailable request without its sub-request"
		}
		for j := range r.FirstAvailable {
			if r.FirstAvailable[j].Name == sub {
				return subReq(r, &r.FirstAvailable[j]), r, ""
			}
		}
		return effReq{}, nil, "names an unknown sub-request"
	}
	return effReq{}, nil, "names an unknown request"
}

// check returns the ways in which results (one per claim, in order) break
// the rules; nil when they are a valid allocation on the node.
func (k *checker) check(results []*resourcev1.AllocationResult) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if len(results) != len(k.c.Claims) {
		bad("%d results for %d claims", len(results), len(k.c.Claims))
		return probs
	}
	holes := map[Hole]bool{}
	for _, h := range k.c.Holes {
		holes[h] = true
	}
	usedBy := map[Hole]string{} // non-admin use in this pod → claim/request
	consumed := map[poolKey]map[string]map[string]resource.Quantity{}
	touched := map[poolKey]map[string]bool{} // counter sets the pod's results take from
	consume := func(p *cpool, d *cdev) {
		for _, cc := range d.dev.ConsumesCounters {
			if consumed[p.key] == nil {
				consumed[p.key] = map[string]map[string]resource.Quantity{}
			}
			if consumed[p.key][cc.CounterSet] == nil {
				consumed[p.key][cc.CounterSet] = map[string]resource.Quantity{}
			}
			for n, v := range cc.Counters {
				q := consumed[p.key][cc.CounterSet][n].DeepCopy()
				q.Add(v.Value)
				consumed[p.key][cc.CounterSet][n] = q
			}
		}
	}
	// Devices already allocated take their counters, wherever their node;
	// a shared device once, whatever its number of shares.
	shared := map[Hole]bool{}
	capUsed := map[Hole]map[resourcev1.QualifiedName]resource.Quantity{}
	addCap := func(id Hole, consumed map[resourcev1.QualifiedName]resource.Quantity) {
		if capUsed[id] == nil {
			capUsed[id] = map[resourcev1.QualifiedName]resource.Quantity{}
		}
		for n, q := range consumed {
			sum := capUsed[id][n].DeepCopy()
			sum.Add(q)
			capUsed[id][n] = sum
		}
	}
	for _, h := range k.c.Holes {
		if d, p := k.device(h); d != nil {
			consume(p, d)
		}
	}
	for _, sh := range k.c.Shares {
		addCap(sh.Hole, sh.Consumed)
		if d, p := k.device(sh.Hole); d != nil && !shared[sh.Hole] {
			consume(p, d)
		}
		shared[sh.Hole] = true
	}
	for ci, claim := range k.c.Claims {
		res := results[ci]
		cn := claim.Name
		if res == nil {
			bad("%s: no allocation result", cn)
			continue
		}
		if res.NodeSelector != nil && !nodeSelectorMatches(res.NodeSelector, k.node) {
			bad("%s: the result's nodeSelector does not select the node", cn)
		}
		inClaim := map[Hole]string{}
		byRequest := map[string][]*cdev{} // result request name → devices
		chosenSub := map[string]string{}  // firstAvailable request → "r/s"
		members := map[string][]*cdev{}   // for constraints: result request name → devices
		for ri, r := range res.Devices.Results {
			id := Hole{r.Driver, r.Pool, r.Device}
			where := fmt.Sprintf("%s result %d (%s: %s)", cn, ri, r.Request, id)
			e, req, why := requestOf(claim, r.Request)
			if why != "" {
				bad("%s: %s", where, why)
				continue
			}
			if len(req.FirstAvailable) > 0 {
				if prev, ok := chosenSub[req.Name]; ok && prev != r.Request {
					bad("%s: request %s has results for both %s and %s", where, req.Name, prev, r.Request)
				}
				chosenSub[req.Name] = r.Request
			}
			d, p := k.device(id)
			switch {
			case p == nil:
				bad("%s: no such pool", where)
				continue
			case d == nil:
				bad("%s: no such device in the pool's generation %d", where, p.generation)
				continue
			case !p.usable():
				bad("%s: pool not usable (%s%s)", where, p.incomplete, p.invalid)
			}
			if !d.availableOn(k.node) {
				bad("%s: device not available on node %s", where, k.node.Name)
			}
			if res.NodeSelector != nil {
				for _, n := range k.c.Nodes {
					if nodeSelectorMatches(res.NodeSelector, n) && !d.availableOn(n) {
						bad("%s: the result's nodeSelector selects node %s where the device is not available", where, n.Name)
					}
				}
			} else if slices.ContainsFunc(k.c.Nodes, func(n *k8scorev1.Node) bool { return !d.availableOn(n) }) {
				bad("%s: the result has no nodeSelector but the device is not available on every node", where)
			}
			if ok, err := k.c.matches(e, d); err != nil {
				bad("%s: %v", where, err)
			} else if !ok {
				bad("%s: device does not match class %s and the request's selectors", where, e.class)
			}
			if t := untoleratedTaint(d.dev, e.tolerations); t != nil {
				bad("%s: taint %s=%s:%s not tolerated", where, t.Key, t.Value, t.Effect)
			}
			// "A copy of all tolerations specified in the request at the
			// time when the device got allocated."
			if !(len(r.Tolerations) == 0 && len(e.tolerations) == 0) && !equality.Semantic.DeepEqual(r.Tolerations, e.tolerations) {
				bad("%s: tolerations %v are not the request's %v", where, r.Tolerations, e.tolerations)
			}
			if ptr.Deref(r.AdminAccess, false) != e.admin {
				bad("%s: adminAccess %v, request says %v", where, ptr.Deref(r.AdminAccess, false), e.admin)
			}
			multi := ptr.Deref(d.dev.AllowMultipleAllocations, false)
			want, serves := servesCapacity(e, d)
			if !serves {
				bad("%s: device cannot serve capacity requests %v", where, e.capacity)
			}
			switch {
			case multi && r.ShareID == nil:
				bad("%s: device allows multiple allocations, result has no shareID", where)
			case !multi && (r.ShareID != nil || len(r.ConsumedCapacity) > 0):
				bad("%s: shareID or consumedCapacity on a device without allowMultipleAllocations", where)
			case multi && serves && !sameQuantities(want, r.ConsumedCapacity):
				bad("%s: consumedCapacity %v, the request's share is %v", where, r.ConsumedCapacity, want)
			}
			// A shareable device may serve several requests of the claim,
			// each once.
			if prev, dup := inClaim[id]; dup && (!multi || prev == r.Request) {
				bad("%s: device already in this claim for %s", where, prev)
			}
			inClaim[id] = r.Request
			if !e.admin {
				if holes[id] {
					bad("%s: device is already allocated", where)
				}
				if prev, dup := usedBy[id]; dup && !multi {
					bad("%s: device also allocated to %s", where, prev)
				}
				if shared[id] && !multi {
					bad("%s: device has shares", where)
				}
				usedBy[id] = cn + "/" + r.Request
				if multi {
					addCap(id, r.ConsumedCapacity)
					if shared[id] {
						byRequest[r.Request] = append(byRequest[r.Request], d)
						members[r.Request] = append(members[r.Request], d)
						continue // its counters are taken
					}
					shared[id] = true
				}
				consume(p, d)
				for _, cc := range d.dev.ConsumesCounters {
					if touched[p.key] == nil {
						touched[p.key] = map[string]bool{}
					}
					touched[p.key][cc.CounterSet] = true
				}
			}
			byRequest[r.Request] = append(byRequest[r.Request], d)
			members[r.Request] = append(members[r.Request], d)
		}
		// Counts.
		for i := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[i]
			var e effReq
			if len(req.FirstAvailable) == 0 {
				e = exactReq(req)
			} else {
				name, ok := chosenSub[req.Name]
				if !ok {
					bad("%s: request %s has no result", cn, req.Name)
					continue
				}
				e, _, _ = requestOf(claim, name)
			}
			got := byRequest[e.name]
			if n := e.exactCount(); n >= 0 {
				if int64(len(got)) != n {
					bad("%s: request %s wants %d devices, got %d", cn, e.name, n, len(got))
				}
				continue
			}
			want, why := k.allSet(e)
			if why != "" {
				bad("%s: request %s (All) cannot be satisfied: %s", cn, e.name, why)
				continue
			}
			gotSet := map[Hole]bool{}
			for _, d := range got {
				gotSet[d.id] = true
			}
			for id := range want {
				if !gotSet[id] {
					bad("%s: request %s (All) lacks matching device %s", cn, e.name, id)
				}
			}
			for id := range gotSet {
				if !want[id] {
					bad("%s: request %s (All) has device %s outside the matching set", cn, e.name, id)
				}
			}
		}
		// Constraints.
		for i, con := range claim.Spec.Devices.Constraints {
			var ds []*cdev
			for name, devs := range members {
				base, _, _ := strings.Cut(name, "/")
				if len(con.Requests) == 0 || slices.Contains(con.Requests, name) || slices.Contains(con.Requests, base) {
					ds = append(ds, devs...)
				}
			}
			switch {
			case con.MatchAttribute != nil:
				var first string
				for j, d := range ds {
					a := lookupAttr(d, *con.MatchAttribute)
					if a == nil {
						bad("%s: constraint %d: %s lacks matchAttribute %s", cn, i, d.id, *con.MatchAttribute)
						continue
					}
					if j == 0 || first == "" {
						first = attrKey(a)
					} else if attrKey(a) != first {
						bad("%s: constraint %d: matchAttribute %s differs (%s vs %s)", cn, i, *con.MatchAttribute, attrKey(a), first)
					}
				}
			case con.DistinctAttribute != nil:
				seen := map[string]Hole{}
				for _, d := range ds {
					a := lookupAttr(d, *con.DistinctAttribute)
					if a == nil {
						bad("%s: constraint %d: %s lacks distinctAttribute %s", cn, i, d.id, *con.DistinctAttribute)
						continue
					}
					if prev, dup := seen[attrKey(a)]; dup {
						bad("%s: constraint %d: distinctAttribute %s repeats %s on %s and %s", cn, i, *con.DistinctAttribute, attrKey(a), prev, d.id)
					}
					seen[attrKey(a)] = d.id
				}
			}
		}
	}
	// Capacity: the shares of a device fit it.
	for id, used := range capUsed {
		d, _ := k.device(id)
		if d == nil {
			continue
		}
		for n, q := range used {
			if c, ok := d.dev.Capacity[n]; ok && q.Cmp(c.Value) > 0 {
				bad("device %s: shares consume %s of capacity %s, which is %s", id, q.String(), n, c.Value.String())
			}
		}
	}
	// Counters.
	for pk, sets := range consumed {
		p := k.pools[pk]
		if !p.usable() {
			continue // nothing of it is allocated now; a hole's counters do not matter
		}
		for set, cs := range sets {
			if !touched[pk][set] {
				continue // only what the pod takes is judged, not the holes alone
			}
			for n, used := range cs {
				avail := p.counters[set][n]
				if used.Cmp(avail) > 0 {
					bad("pool %s/%s: counter %s/%s: %s consumed, %s available", pk.driver, pk.pool, set, n, used.String(), avail.String())
				}
			}
		}
	}
	slices.Sort(probs)
	return probs
}

// subVector lists, for each firstAvailable request of the pod in claim
// then request order, the index of the chosen sub-request (-1 when the
// results do not say).
func subVector(c *Case, results []*resourcev1.AllocationResult) []int {
	var v []int
	for ci, claim := range c.Claims {
		for _, req := range claim.Spec.Devices.Requests {
			if len(req.FirstAvailable) == 0 {
				continue
			}
			idx := -1
			if ci < len(results) && results[ci] != nil {
				for _, r := range results[ci].Devices.Results {
					base, sub, _ := strings.Cut(r.Request, "/")
					if base != req.Name {
						continue
					}
					idx = slices.IndexFunc(req.FirstAvailable, func(s resourcev1.DeviceSubRequest) bool { return s.Name == sub })
					break
				}
			}
			v = append(v, idx)
		}
	}
	return v
}

// servesCapacity applies a request's capacity.requests to a device, as the
// API documents them: every capacity named must exist on the device; a
// device without allowMultipleAllocations serves a value up to its
// capacity; a shareable device's share of each capacity is the request's
// value rounded up by the capacity's requestPolicy (validRange: min, then
// min plus whole steps; validValues: the smallest one at least the
// value), the policy's default without a value, the whole capacity
// without either, and must keep the policy and fit the capacity. It
// returns the share for a shareable device.
func servesCapacity(e effReq, d *cdev) (map[resourcev1.QualifiedName]resource.Quantity, bool) {
	var reqs map[resourcev1.QualifiedName]resource.Quantity
	if e.capacity != nil {
		reqs = e.capacity.Requests
	}
	for n := range reqs {
		if _, ok := d.dev.Capacity[n]; !ok {
			return nil, false
		}
	}
	if !ptr.Deref(d.dev.AllowMultipleAllocations, false) {
		for n, q := range reqs {
			if q.Cmp(d.dev.Capacity[n].Value) > 0 {
				return nil, false
			}
		}
		return nil, true
	}
	out := map[resourcev1.QualifiedName]resource.Quantity{}
	for n, c := range d.dev.Capacity {
		q, has := reqs[n]
		p := c.RequestPolicy
		var share resource.Quantity
		switch {
		case !has && p != nil && p.Default != nil:
			share = p.Default.DeepCopy()
		case !has:
			share = c.Value.DeepCopy()
		case p != nil && p.ValidRange != nil:
			share = roundUpToStep(q, p.ValidRange)
		case p != nil && len(p.ValidValues) > 0:
			share = q.DeepCopy()
			for _, v := range p.ValidValues {
				if v.Cmp(q) >= 0 {
					share = v.DeepCopy()
					break
				}
			}
		default:
			share = q.DeepCopy()
		}
		if share.Cmp(c.Value) > 0 || !keepsPolicy(share, p) {
			return nil, false
		}
		out[n] = share
	}
	return out, true
}

func ratOf(q resource.Quantity) *big.Rat {
	r, ok := new(big.Rat).SetString(q.AsDec().String())
	if !ok {
		panic("quantity " + q.String())
	}
	return r
}

func roundUpToStep(q resource.Quantity, r *resourcev1.CapacityRequestPolicyRange) resource.Quantity {
	if q.Cmp(*r.Min) <= 0 {
		return r.Min.DeepCopy()
	}
	if r.Step == nil {
		return q.DeepCopy()
	}
	n := new(big.Rat).Quo(new(big.Rat).Sub(ratOf(q), ratOf(*r.Min)), ratOf(*r.Step))
	steps := new(big.Int).Quo(n.Num(), n.Denom())
	if !n.IsInt() {
		steps.Add(steps, big.NewInt(1))
	}
	v := new(big.Rat).Add(ratOf(*r.Min), new(big.Rat).Mul(new(big.Rat).SetInt(steps), ratOf(*r.Step)))
	return resource.MustParse(v.FloatString(3))
}

func keepsPolicy(q resource.Quantity, p *resourcev1.CapacityRequestPolicy) bool {
	switch {
	case p == nil, p.Default != nil && q.Cmp(*p.Default) == 0:
		return true
	case p.ValidRange != nil:
		r := p.ValidRange
		if r.Max != nil && q.Cmp(*r.Max) > 0 {
			return false
		}
		if r.Step != nil {
			n := new(big.Rat).Quo(new(big.Rat).Sub(ratOf(q), ratOf(*r.Min)), ratOf(*r.Step))
			return n.IsInt()
		}
	case len(p.ValidValues) > 0:
		return slices.ContainsFunc(p.ValidValues, func(v resource.Quantity) bool { return v.Cmp(q) == 0 })
	}
	return true
}

func sameQuantities(a, b map[resourcev1.QualifiedName]resource.Quantity) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if v, ok := b[n]; !ok || v.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
