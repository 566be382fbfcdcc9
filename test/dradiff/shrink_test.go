package dradiff

import (
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
)

// The shrinker: greedily removes parts of a failing case (other nodes,
// claims, requests, alternatives, selectors, constraints, tolerations,
// holes, slices, devices, taints, unused classes) while the same kind of
// disagreement remains on the node, so that a failure prints a small
// reproduction.

// edit is one candidate reduction of a case; it returns false when it does
// not apply.
type edit func(*Case) bool

func edits(c *Case, node string) []edit {
	var es []edit
	for i, n := range c.Nodes {
		if n.Name != node {
			es = append(es, func(x *Case) bool { x.Nodes = slices.Delete(x.Nodes, i, i+1); return true })
		}
	}
	for i := range c.Claims {
		if len(c.Claims) > 1 {
			es = append(es, func(x *Case) bool { x.Claims = slices.Delete(x.Claims, i, i+1); return true })
		}
		cl := c.Claims[i]
		for j := range cl.Spec.Devices.Constraints {
			es = append(es, func(x *Case) bool {
				d := &x.Claims[i].Spec.Devices
				d.Constraints = slices.Delete(d.Constraints, j, j+1)
				return true
			})
		}
		for j, req := range cl.Spec.Devices.Requests {
			if len(cl.Spec.Devices.Requests) > 1 {
				es = append(es, func(x *Case) bool { removeRequest(x.Claims[i], j); return true })
			}
			if req.Exactly != nil {
				es = append(es, exactEdits(i, j, req.Exactly)...)
			}
			for k := range req.FirstAvailable {
				if len(req.FirstAvailable) > 1 {
					es = append(es, func(x *Case) bool { removeSubRequest(x.Claims[i], j, k); return true })
				}
				sub := &req.FirstAvailable[k]
				for s := range sub.Selectors {
					es = append(es, func(x *Case) bool {
						sr := &x.Claims[i].Spec.Devices.Requests[j].FirstAvailable[k]
						sr.Selectors = slices.Delete(sr.Selectors, s, s+1)
						return true
					})
				}
				if len(sub.Tolerations) > 0 {
					es = append(es, func(x *Case) bool {
						x.Claims[i].Spec.Devices.Requests[j].FirstAvailable[k].Tolerations = nil
						return true
					})
				}
				if sub.Count > 1 {
					es = append(es, func(x *Case) bool {
						x.Claims[i].Spec.Devices.Requests[j].FirstAvailable[k].Count--
						return true
					})
				}
			}
		}
	}
	for i := range c.Holes {
		es = append(es, func(x *Case) bool { x.Holes = slices.Delete(x.Holes, i, i+1); return true })
	}
	for i, s := range c.Slices {
		es = append(es, func(x *Case) bool {
			x.Slices = slices.Delete(x.Slices, i, i+1)
			dropDanglingHoles(x)
			return true
		})
		for j, d := range s.Spec.Devices {
			if len(s.Spec.Devices) > 1 {
				es = append(es, func(x *Case) bool {
					x.Slices[i].Spec.Devices = slices.Delete(x.Slices[i].Spec.Devices, j, j+1)
					dropDanglingHoles(x)
					return true
				})
			}
			if len(d.Taints) > 0 {
				es = append(es, func(x *Case) bool { x.Slices[i].Spec.Devices[j].Taints = nil; return true })
			}
			for a := range d.Attributes {
				es = append(es, func(x *Case) bool { delete(x.Slices[i].Spec.Devices[j].Attributes, a); return true })
			}
		}
	}
	for i, cl := range c.Classes {
		es = append(es, func(x *Case) bool {
			if classUsed(x, cl.Name) {
				return false
			}
			x.Classes = slices.Delete(x.Classes, i, i+1)
			return true
		})
	}
	return es
}

func exactEdits(i, j int, ex *resourcev1.ExactDeviceRequest) []edit {
	var es []edit
	get := func(x *Case) *resourcev1.ExactDeviceRequest { return x.Claims[i].Spec.Devices.Requests[j].Exactly }
	for s := range ex.Selectors {
		es = append(es, func(x *Case) bool { e := get(x); e.Selectors = slices.Delete(e.Selectors, s, s+1); return true })
	}
	if len(ex.Tolerations) > 0 {
		es = append(es, func(x *Case) bool { get(x).Tolerations = nil; return true })
	}
	if ex.Count > 1 {
		es = append(es, func(x *Case) bool { get(x).Count--; return true })
	}
	if ex.AdminAccess != nil {
		es = append(es, func(x *Case) bool { get(x).AdminAccess = nil; return true })
	}
	return es
}

// removeRequest deletes a request and its names from the claim's
// constraints; a constraint left without names is deleted (an empty list
// would mean every request).
func removeRequest(cl *resourcev1.ResourceClaim, j int) {
	d := &cl.Spec.Devices
	name := d.Requests[j].Name
	d.Requests = slices.Delete(d.Requests, j, j+1)
	pruneConstraints(cl, func(n string) bool { return n == name || strings.HasPrefix(n, name+"/") })
}

func removeSubRequest(cl *resourcev1.ResourceClaim, j, k int) {
	req := &cl.Spec.Devices.Requests[j]
	name := req.Name + "/" + req.FirstAvailable[k].Name
	req.FirstAvailable = slices.Delete(req.FirstAvailable, k, k+1)
	pruneConstraints(cl, func(n string) bool { return n == name })
}

func pruneConstraints(cl *resourcev1.ResourceClaim, gone func(string) bool) {
	d := &cl.Spec.Devices
	var keep []resourcev1.DeviceConstraint
	for _, con := range d.Constraints {
		if len(con.Requests) > 0 {
			con.Requests = slices.DeleteFunc(slices.Clone(con.Requests), gone)
			if len(con.Requests) == 0 {
				continue
			}
		}
		keep = append(keep, con)
	}
	d.Constraints = keep
}

func dropDanglingHoles(x *Case) {
	pools := checkerPools(x)
	x.Holes = slices.DeleteFunc(x.Holes, func(h Hole) bool {
		p := pools[poolKey{h.Driver, h.Pool}]
		return p == nil || p.devices[h.Device] == nil
	})
}

func classUsed(x *Case, name string) bool {
	for _, cl := range x.Claims {
		for _, r := range cl.Spec.Devices.Requests {
			if r.Exactly != nil && r.Exactly.DeviceClassName == name {
				return true
			}
			for _, s := range r.FirstAvailable {
				if s.DeviceClassName == name {
					return true
				}
			}
		}
	}
	return false
}

// shrink reduces c while compareNode on the node still reports a
// disagreement of the kind, within the time budget.
func shrink(c *Case, node, kind string, budget time.Duration) *Case {
	deadline := time.Now().Add(budget)
	cur := c
	for progress := true; progress && time.Now().Before(deadline); {
		progress = false
		for _, e := range edits(cur, node) {
			if time.Now().After(deadline) {
				break
			}
			x := cur.Clone()
			if !e(x) {
				continue
			}
			n := nodeByName(x, node)
			if n == nil {
				continue
			}
			if rep := compareNode(x, n); rep.verdict == disagreement && rep.kind == kind {
				cur, progress = x, true
				break // the edit list refers to cur's shape: rebuild it
			}
		}
	}
	return cur
}
