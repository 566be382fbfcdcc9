package engine

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Request is the one definition of a pod's requests that the search
// runs: per claim (in the pod's order), its key as reasons name it,
// whether it is pending (to be allocated), and, when it is, its requests
// (each an exact request or firstAvailable subrequests, with class and
// own selectors, count or All, admin access, tolerations and capacity
// requests) and constraints (matchAttribute, distinctAttribute). The v1
// front end resolves claims and classes into it (PrepareV1). It is
// read-only once built.
type Request struct {
	Keys    []string
	Pending []bool
	Reqs    [][]Req        // per claim: its requests, when pending
	Cons    [][]Constraint // per claim: its constraints, when pending
}

// Req is one request of a pending claim.
type Req struct {
	Claim int
	Name  string
	Alts  []Alt // the exactly request, or the firstAvailable subrequests in order
	First bool  // firstAvailable
}

// Alt is one way to satisfy a request: the exactly request or one
// subrequest.
type Alt struct {
	Name        string // in results and constraints: "request" or "request/subrequest"
	Class       *resourcev1.DeviceClass
	ClassSel    []string
	Sel         []string
	All         bool // allocationMode All
	Count       int
	Admin       bool
	Tolerations []resourcev1.DeviceToleration
	// CapReqs is the request's capacity.requests (nil: none).
	CapReqs map[resourcev1.QualifiedName]resource.Quantity
}

// Constraint is one constraint of a claim.
type Constraint struct {
	Match    bool // matchAttribute, else distinctAttribute
	Attr     resourcev1.FullyQualifiedName
	Requests []string
	Clause   string // as quoted in reasons
}

// Applies reports whether the constraint covers devices allocated for the
// alternative of request req: all requests when it lists none, else the
// request by its name (whatever subrequest is chosen) or the subrequest by
// "request/subrequest".
func (c *Constraint) Applies(req string, a *Alt) bool {
	return len(c.Requests) == 0 || slices.Contains(c.Requests, req) || slices.Contains(c.Requests, a.Name)
}
