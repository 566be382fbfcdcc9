package dradiff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The firstAvailable rule: "[the scheduler] tries to satisfy them in the
// order in which they are listed here. So if there are two entries in the
// list, the scheduler will only check the second one if it determines that
// the first one can not be used." Upstream's search fixes the devices of
// earlier requests before it chooses a later request's alternative, so the
// alternative it ends with is not the earliest over all allocations; what
// every first-fit order guarantees is local: with everything else of the
// allocation kept, no earlier alternative of the request could have been
// allocated instead. checkPriority tests exactly that, by asking upstream
// to allocate the earlier alternative alone, as a one-request claim, with
// every other device of the allocation taken and the claim's constraints
// turned into selectors on the values the other devices have.

// priorityViolation is a firstAvailable request whose earlier alternative
// was usable.
type priorityViolation struct {
	claim, request string
	chosen, usable string
	results        []resourcev1.AllocationResult
}

func (v priorityViolation) String() string {
	return fmt.Sprintf("%s: request %s got alternative %s, but %s fits with the rest of the allocation unchanged (upstream allocates it as %s)",
		v.claim, v.request, v.chosen, v.usable, strings.TrimSpace(dumpResults(ptrs(v.results))))
}

func checkPriority(c *Case, node *k8scorev1.Node, results []*resourcev1.AllocationResult) ([]priorityViolation, error) {
	pools := checkerPools(c)
	var out []priorityViolation
	for ci, claim := range c.Claims {
		for ri := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[ri]
			if len(req.FirstAvailable) < 2 {
				continue
			}
			chosen := -1
			for _, r := range results[ci].Devices.Results {
				if base, sub, _ := strings.Cut(r.Request, "/"); base == req.Name {
					for k := range req.FirstAvailable {
						if req.FirstAvailable[k].Name == sub {
							chosen = k
						}
					}
				}
			}
			for j := 0; j < chosen; j++ {
				x, err := alternativeAlone(c, pools, results, ci, ri, j)
				if err != nil {
					return nil, err
				}
				o := runUpstream(x, x.Claims, node, *flagLimit)
				if o.kind != fit {
					continue
				}
				// The witness: the allocation with upstream's devices for
				// the earlier alternative in place of the request's. It
				// must be valid as a whole.
				witness := make([]*resourcev1.AllocationResult, len(results))
				for k, res := range results {
					w := res.DeepCopy()
					if k == ci {
						w.Devices.Results = slices.DeleteFunc(w.Devices.Results, func(r resourcev1.DeviceRequestAllocationResult) bool {
							base, _, _ := strings.Cut(r.Request, "/")
							return base == req.Name
						})
						for _, r := range o.results[0].Devices.Results {
							r.Request = req.Name + "/" + req.FirstAvailable[j].Name
							w.Devices.Results = append(w.Devices.Results, r)
						}
					}
					witness[k] = w
				}
				if probs := newChecker(c, node).check(witness); len(probs) == 0 {
					out = append(out, priorityViolation{
						claim: claim.Name, request: req.Name,
						chosen: req.Name + "/" + req.FirstAvailable[chosen].Name,
						usable: req.Name + "/" + req.FirstAvailable[j].Name, results: o.results,
					})
					break
				}
			}
		}
	}
	return out, nil
}

// alternativeAlone builds the case "allocate alternative j of request ri
// of claim ci, with the rest of the results fixed".
func alternativeAlone(c *Case, pools map[poolKey]*cpool, results []*resourcev1.AllocationResult, ci, ri, j int) (*Case, error) {
	claim := c.Claims[ci]
	req := claim.Spec.Devices.Requests[ri]
	sub := req.FirstAvailable[j]
	x := c.Clone()
	// Every other device of the pod's allocation is taken. That includes
	// devices taken with admin access, which another claim could share:
	// the stricter reading (upstream's, within one attempt; and the same
	// claim never names a device twice) can only hide a violation, never
	// invent one.
	for k, res := range results {
		for _, r := range res.Devices.Results {
			base, _, _ := strings.Cut(r.Request, "/")
			if k == ci && base == req.Name {
				continue
			}
			if r.ShareID != nil {
				x.Shares = append(x.Shares, Share{Hole: Hole{r.Driver, r.Pool, r.Device}, Consumed: r.ConsumedCapacity})
				continue
			}
			x.Holes = append(x.Holes, Hole{r.Driver, r.Pool, r.Device})
		}
	}
	ex := &resourcev1.ExactDeviceRequest{
		DeviceClassName: sub.DeviceClassName,
		Selectors:       append([]resourcev1.DeviceSelector(nil), sub.Selectors...),
		AllocationMode:  sub.AllocationMode,
		Count:           sub.Count,
		Tolerations:     sub.Tolerations,
		Capacity:        sub.Capacity,
	}
	one := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
	}
	altName := req.Name + "/" + sub.Name
	// The claim's constraints that cover the alternative: among its own
	// devices they stay constraints; against the other devices of the
	// claim they become selectors.
	for _, con := range claim.Spec.Devices.Constraints {
		covers := func(name string) bool {
			if len(con.Requests) == 0 {
				return true
			}
			base, _, _ := strings.Cut(name, "/")
			for _, n := range con.Requests {
				if n == name || n == base {
					return true
				}
			}
			return false
		}
		if !covers(altName) {
			continue
		}
		attr := con.MatchAttribute
		if attr == nil {
			attr = con.DistinctAttribute
		}
		var others []*resourcev1.DeviceAttribute
		for _, r := range results[ci].Devices.Results {
			base, _, _ := strings.Cut(r.Request, "/")
			if base == req.Name || !covers(r.Request) {
				continue
			}
			p := pools[poolKey{r.Driver, r.Pool}]
			if p == nil || p.devices[r.Device] == nil {
				return nil, fmt.Errorf("result device %s/%s/%s unknown", r.Driver, r.Pool, r.Device)
			}
			a := lookupAttr(p.devices[r.Device], *attr)
			if a == nil {
				return nil, fmt.Errorf("result device %s/%s/%s lacks %s", r.Driver, r.Pool, r.Device, *attr)
			}
			others = append(others, a)
		}
		// For allocation mode All the selectors would shrink the set of
		// devices "all" means; there the witness check decides alone.
		if len(others) > 0 && sub.AllocationMode != resourcev1.DeviceAllocationModeAll {
			ex.Selectors = append(ex.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{
				Expression: attrCompare(*attr, others, con.MatchAttribute != nil),
			}})
		}
		one.Spec.Devices.Constraints = append(one.Spec.Devices.Constraints, resourcev1.DeviceConstraint{
			Requests: []string{req.Name}, MatchAttribute: con.MatchAttribute, DistinctAttribute: con.DistinctAttribute,
		})
	}
	one.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: req.Name, Exactly: ex}}
	x.Claims = []*resourcev1.ResourceClaim{one}
	return x, nil
}

// attrCompare is a CEL selector: the device has the attribute, and its
// value equals the first of the values (match) or none of them (distinct).
func attrCompare(name resourcev1.FullyQualifiedName, vals []*resourcev1.DeviceAttribute, match bool) string {
	dom, id, _ := strings.Cut(string(name), "/")
	ref := fmt.Sprintf("device.attributes[%q].%s", dom, id)
	eq := func(a *resourcev1.DeviceAttribute) string {
		switch {
		case a.IntValue != nil:
			return ref + " == " + strconv.FormatInt(*a.IntValue, 10)
		case a.BoolValue != nil:
			return ref + " == " + strconv.FormatBool(*a.BoolValue)
		case a.StringValue != nil:
			return ref + " == " + strconv.Quote(*a.StringValue)
		case a.VersionValue != nil:
			return fmt.Sprintf("%s.compareTo(semver(%q)) == 0", ref, *a.VersionValue)
		}
		return "false"
	}
	expr := fmt.Sprintf("%q in device.attributes[%q]", id, dom)
	if match {
		return expr + " && " + eq(vals[0])
	}
	for _, v := range vals {
		expr += " && !(" + eq(v) + ")"
	}
	return expr
}

// checkLexFirst tests allot's own, stronger promise (AllocateV1: "with
// several such requests (all claims of the pod, in order) the
// combinations are taken lexicographically, and the first combination for
// which devices exist wins"): for each firstAvailable request i with
// chosen alternative k, and each earlier alternative j, upstream is asked
// with the requests before i pinned to allot's choices, request i pinned
// to j and the rest free. If upstream fits, a lexicographically earlier
// combination exists.
func checkLexFirst(c *Case, node *k8scorev1.Node, v []int) []string {
	var out []string
	for i, k := range v {
		for j := 0; j < k; j++ {
			pin := make([]int, len(v))
			for n := range pin {
				switch {
				case n < i:
					pin[n] = v[n]
				case n == i:
					pin[n] = j
				default:
					pin[n] = -1
				}
			}
			x := pinSubRequests(c, pin)
			if o := runUpstream(x, x.Claims, node, *flagLimit); o.kind == fit && len(newChecker(x, node).check(ptrs(o.results))) == 0 {
				out = append(out, fmt.Sprintf("firstAvailable combination %v chosen, but upstream allocates the earlier %v: %s",
					v, pin[:i+1], strings.TrimSpace(dumpResults(ptrs(o.results)))))
				return out
			}
		}
	}
	return out
}
