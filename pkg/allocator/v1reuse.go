package allocator

import (
	"fmt"
	"slices"
	"strings"

	"allot.dev/allot/pkg/allocator/engine"

	resourcev1 "k8s.io/api/resource/v1"
)

// Answers of AllocateV1 shared by requests of one shape, as Signature and
// Result.For do for Check: pods built from one template have v1 requests
// of equal Signature, and a caller that remembers an answer per node
// state (the scheduler's answer reuse) takes it For the next such request
// instead of searching again.

// Signature is equal for two V1Requests exactly when AllocateV1 answers
// them alike on every state and node, apart from what names their claims
// (see V1Result.For): per claim, in order, whether its namespace allows
// admin access, its requests (names, firstAvailable, and per exactly
// request or subrequest: its name, class at the same resourceVersion,
// selectors, allocation mode and count, admin access, tolerations,
// capacity requests) and its constraints. The claims' configuration is
// not part of it: For rebuilds it. It is "" for a request whose answers
// are not to be shared: one with pod-level reasons, no claims, a claim
// that is already allocated (its allocation and reservations are its
// own), or a class without a resourceVersion to tell its versions apart.
func (r *V1Request) Signature() string {
	r.sigOnce.Do(func() { r.sig = intern(r.signature()) })
	return r.sig
}

func (r *V1Request) signature() string {
	if len(r.reasons) > 0 || len(r.claims) == 0 {
		return ""
	}
	var b strings.Builder
	for ci, c := range r.claims {
		if !r.Pending[ci] {
			return ""
		}
		fmt.Fprintf(&b, "C%t", c.AdminNamespace)
		for _, q := range r.Reqs[ci] {
			fmt.Fprintf(&b, "q%q%t", q.Name, q.First)
			for i := range q.Alts {
				if !writeV1Alt(&b, &q.Alts[i]) {
					return ""
				}
			}
		}
		for _, k := range r.Cons[ci] {
			fmt.Fprintf(&b, "k%t%q%q", k.Match, k.Attr, k.Clause)
			for _, q := range k.Requests {
				fmt.Fprintf(&b, "r%q", q)
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

// writeV1Alt writes one exactly request or subrequest into a signature;
// false when its class has no resourceVersion.
func writeV1Alt(b *strings.Builder, a *engine.Alt) bool {
	if a.Class == nil || a.Class.ResourceVersion == "" {
		return false
	}
	fmt.Fprintf(b, "a%q%q%q%q%t,%d,%t", a.Name, a.Class.Name, a.Class.UID, a.Class.ResourceVersion, a.All, a.Count, a.Admin)
	for _, e := range a.Sel {
		fmt.Fprintf(b, "s%q", e)
	}
	for _, t := range a.Tolerations {
		fmt.Fprintf(b, "t%q%q%q%q", t.Key, t.Operator, t.Value, t.Effect)
		if t.TolerationSeconds != nil {
			fmt.Fprintf(b, "%d", *t.TolerationSeconds)
		}
	}
	for _, n := range sortedKeys(a.CapReqs) {
		q := a.CapReqs[n]
		fmt.Fprintf(b, "c%q=%s", n, q.String())
	}
	return true
}

// For returns, for req, the answer AllocateV1 gives req on the state and
// node r was computed on; r must come from AllocateV1 of a request with
// the same non-empty Signature as req. Fits and Score are r's; the
// reasons name req's claims (claims matched by position); the
// allocations are copies with the configuration of req's claims and the
// share IDs AllocateV1 gives their shares (RederiveShareIDs), so that no
// two claims carry one share ID of a device. r itself when it answers
// req. A result of CheckV1 stays one: Build builds req's allocations.
func (r *V1Result) For(req *V1Request) *V1Result {
	if r.req == req || r.req == nil || req == nil {
		return r
	}
	out := *r
	out.req = req
	out.Reasons = req.rebind(r.req, r.Reasons)
	if r.Allocations != nil {
		out.Allocations = make([]*resourcev1.AllocationResult, len(r.Allocations))
		for ci, a := range r.Allocations {
			if a == nil || ci >= len(req.claims) {
				continue
			}
			c := a.DeepCopy()
			claim := req.claims[ci].Claim
			c.Devices.Config = v1Config(claim, req.Reqs[ci], req.chosenAlts(ci, a))
			RederiveShareIDs(claim, c)
			out.Allocations[ci] = c
		}
	}
	return &out
}

// ReasonsFor returns r's reasons as AllocateV1 gives them to req (see
// For), without copying the rest of r. The slice must not be modified.
func (r *V1Result) ReasonsFor(req *V1Request) []Reason {
	if r.req == req || r.req == nil || req == nil || len(r.Reasons) == 0 {
		return r.Reasons
	}
	return req.rebind(r.req, r.Reasons)
}

// rebind returns reasons of an AllocateV1 of request from, which has
// the same Signature as r, naming r's claims instead of from's, as the
// seed's Request.rebind does (rebindReasons).
func (r *V1Request) rebind(from *V1Request, reasons []Reason) []Reason {
	return rebindReasons(&r.reasonMemo, reasons, func(claim string) (string, int) {
		j := slices.Index(from.Keys, claim)
		if j < 0 || j >= len(r.Keys) {
			return "", -1
		}
		return r.Keys[j], j
	})
}

// chosenAlts are, per request of claim ci, the exactly request or the
// subrequest that allocation a (of that claim) took, by the request
// names in its results.
func (r *V1Request) chosenAlts(ci int, a *resourcev1.AllocationResult) []*engine.Alt {
	out := make([]*engine.Alt, len(r.Reqs[ci]))
	for qi := range r.Reqs[ci] {
		q := &r.Reqs[ci][qi]
		out[qi] = &q.Alts[0]
		for ai := range q.Alts {
			if slices.ContainsFunc(a.Devices.Results, func(d resourcev1.DeviceRequestAllocationResult) bool {
				return d.Request == q.Alts[ai].Name
			}) {
				out[qi] = &q.Alts[ai]
				break
			}
		}
	}
	return out
}
