package engine

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Solution is a search's best solution as far as the allocation
// results need it, kept past the search (whose arena is reused): a
// front end writes the allocation results from it when they are read
// (the v1 front end's V1Result.Build), for the request it was found for
// or one of the same shape.
type Solution struct {
	Inv  *Inventory
	Reqs []SolReq // per pending request: claims in order, requests in order
	Devs []SolDev // the devices taken, by request, each request's in result order
}

// SolReq is what one pending request took: the alternative (index in
// the request's alts: the exactly request, or the subrequest) and the
// end of its devices in Solution.Devs.
type SolReq struct {
	Alt, End int32
}

// SolDev is one device taken: its inventory index and, for a share of
// a shared device, what the share consumes (the search's own slice,
// never modified; build copies it).
type SolDev struct {
	X        int32
	Consumed []resource.Quantity
}

// solution keeps the search's best solution (see Solution).
func (p *v1prob) solution(s *v1search) *Solution {
	sol := &Solution{Inv: p.inv, Reqs: make([]SolReq, len(p.sreqs)), Devs: make([]SolDev, len(s.best))}
	// Count each request's devices, place them from its start (end is the
	// cursor while filling), then order each request's devices as the
	// inventory does (local devices are in inventory order).
	for _, pk := range s.best {
		sol.Reqs[pk.sreq].End++
	}
	start := int32(0)
	for i := range sol.Reqs {
		start, sol.Reqs[i].End = start+sol.Reqs[i].End, start
	}
	for _, pk := range s.best {
		sr := &p.sreqs[pk.sreq]
		sa := &sr.alts[s.bestChosen[pk.sreq]]
		l := pk.c.l
		dv := SolDev{X: p.devs[l]}
		if p.inv.devs[dv.X].multi {
			dv.Consumed = sa.consumed[l]
		}
		sol.Devs[sol.Reqs[pk.sreq].End] = dv
		sol.Reqs[pk.sreq].End++
	}
	begin := int32(0)
	for i := range sol.Reqs {
		// The search's alternatives of a request are the request's, in
		// order.
		sol.Reqs[i].Alt = int32(s.bestChosen[i])
		end := sol.Reqs[i].End
		slices.SortFunc(sol.Devs[begin:end], func(x, y SolDev) int { return int(x.X - y.X) })
		begin = end
	}
	return sol
}
