package allocator

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// versioned gives the claims' class a resourceVersion, as classes read
// from the API server have; Signature needs one.
func versioned(claims ...Claim) []Claim {
	for i := range claims {
		cls := claims[i].Class.DeepCopy()
		cls.ResourceVersion = "7"
		claims[i].Class = cls
	}
	return claims
}

func TestSignature(t *testing.T) {
	sig := func(claims ...Claim) string { return Prepare(nil, versioned(claims...)).Signature() }
	base := sig(makeClaim("a", "gpu", `quantities["memory"] >= "8Gi"`, "true"))
	if base == "" {
		t.Fatal("a pending claim with a versioned class has no signature")
	}
	if got := sig(makeClaim("b", "gpu", `quantities["memory"] >= "8Gi"`, "true")); got != base {
		t.Errorf("claims that differ only in name: signatures %q and %q", base, got)
	}
	for name, claims := range map[string][]Claim{
		"another selector":  {makeClaim("a", "gpu", `quantities["memory"] >= "16Gi"`, "true")},
		"another driver":    {makeClaim("a", "fpga", `quantities["memory"] >= "8Gi"`, "true")},
		"one request fewer": {makeClaim("a", "gpu", `quantities["memory"] >= "8Gi"`)},
		"requests swapped":  {makeClaim("a", "gpu", "true", `quantities["memory"] >= "8Gi"`)},
		"split in two claims": {makeClaim("a", "gpu", `quantities["memory"] >= "8Gi"`),
			makeClaim("b", "gpu", "true")},
	} {
		if got := sig(claims...); got == base {
			t.Errorf("%s: same signature as the base request", name)
		}
	}
	other := versioned(makeClaim("a", "gpu", `quantities["memory"] >= "8Gi"`, "true"))
	other[0].Class.ResourceVersion = "8"
	if Prepare(nil, other).Signature() == base {
		t.Error("a newer version of the class: same signature")
	}

	allocated := versioned(makeClaim("a", "gpu", "true"))
	allocated[0].Claim = allocatedClaim("a", "n1", "gpu", "gpu-0")
	unversioned := makeClaim("a", "gpu", "true")
	badSelector := makeClaim("a", "gpu", "this is not CEL")
	for name, req := range map[string]*Request{
		"an allocated claim":         Prepare(nil, allocated),
		"a class without a version":  Prepare(nil, []Claim{unversioned}),
		"a pod-level reason":         Prepare(nil, versioned(badSelector)),
		"no claims":                  Prepare(nil, nil),
		"a pending and a used claim": Prepare(nil, append(versioned(makeClaim("b", "gpu", "true")), allocated...)),
	} {
		if s := req.Signature(); s != "" {
			t.Errorf("%s: signature %q, want none", name, s)
		}
	}
}

// renamed is claims with every claim renamed from prefix a to prefix b:
// the same request for another pod from the same template.
func renamed(claims []Claim) []Claim {
	out := make([]Claim, len(claims))
	for i, c := range claims {
		out[i] = c
		cl := c.Claim.DeepCopy()
		cl.Name = "b" + strings.TrimPrefix(cl.Name, "a")
		cl.UID = types.UID("uid-" + cl.Name)
		out[i].Claim = cl
	}
	return out
}

// TestResultForMatchesCheck checks, on random nodes, states and requests,
// that a result of one request handed to another of the same signature
// through For is what Check says of the other: decision, reasons naming
// the other's claims, capacities, score and the allocations Build makes.
func TestResultForMatchesCheck(t *testing.T) {
	const cases = 1500
	fits := 0
	for seed := range uint64(cases) {
		rng := rand.New(rand.NewPCG(seed, 7))
		model := NewModel("node", []*resourceapi.NodeResourceSlice{randomSlice(rng)})
		dm := model.drivers["drv"]
		if dm == nil || len(dm.leaves) > 16 {
			continue
		}
		st := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "node", "drv", randomExisting(rng, dm)...)})
		var sels []string
		for range 1 + rng.IntN(5) {
			sels = append(sels, diffSelectors[rng.IntN(len(diffSelectors))])
		}
		claimsA := versioned(makeClaim("a0", "drv", sels[:1+rng.IntN(len(sels))]...))
		if n := len(claimsA[0].ClaimParameters.Requests[0].Partitionable.Required); n < len(sels) {
			claimsA = append(claimsA, versioned(makeClaim("a1", "drv", sels[n:]...))...)
		}
		reqA, reqB := Prepare(nil, claimsA), Prepare(nil, renamed(claimsA))
		if reqA.Signature() == "" || reqA.Signature() != reqB.Signature() {
			t.Fatalf("seed %d: signatures %q and %q", seed, reqA.Signature(), reqB.Signature())
		}
		resA, err := Check(context.Background(), reqA, st)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want, err := Check(context.Background(), reqB, st)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		got := resA.For(reqB)
		if got.Fits != want.Fits || got.CapacityBefore != want.CapacityBefore || got.CapacityAfter != want.CapacityAfter || got.Score != want.Score {
			t.Fatalf("seed %d: For gives fits=%v capacity %d->%d score %d; Check gives fits=%v capacity %d->%d score %d",
				seed, got.Fits, got.CapacityBefore, got.CapacityAfter, got.Score, want.Fits, want.CapacityBefore, want.CapacityAfter, want.Score)
		}
		if !reflect.DeepEqual(got.Reasons, want.Reasons) {
			t.Fatalf("seed %d: For gives reasons %v, Check %v", seed, got.Reasons, want.Reasons)
		}
		for _, r := range got.Reasons {
			if strings.Contains(r.Message, "default/a") {
				t.Fatalf("seed %d: reason names the other request's claim: %s", seed, r.Message)
			}
		}
		if !reflect.DeepEqual(got.Build(), want.Build()) {
			t.Fatalf("seed %d: For builds %v, Check %v", seed, got.Build(), want.Build())
		}
		if resA.Fits {
			fits++
		}
		// The original keeps its own claims.
		if again := resA.For(reqA); again != resA {
			t.Fatalf("seed %d: For of its own request is a copy", seed)
		}
	}
	if fits == 0 || fits == cases {
		t.Errorf("%d of %d cases fit: the test needs both answers", fits, cases)
	}
}

// TestResultForReasonsNameTheClaims checks the rebinding on a full node,
// where every reason names a claim.
func TestResultForReasonsNameTheClaims(t *testing.T) {
	model := wholeNode("n1", 2)
	st := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("used", "n1", "gpu", "gpu-0", "gpu-1")})
	mk := func(name string) []Claim {
		c := versioned(makeClaim(name, "gpu", "true"))
		c[0].Claim.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: "ns"}
		return c
	}
	reqA, reqB := Prepare(nil, mk("first")), Prepare(nil, mk("second"))
	resA, err := Check(context.Background(), reqA, st)
	if err != nil || resA.Fits || len(resA.Reasons) == 0 {
		t.Fatalf("a full node: fits=%v reasons %v err %v", resA.Fits, resA.Reasons, err)
	}
	got := resA.For(reqB)
	for i, r := range got.Reasons {
		if r.Claim != "ns/second" || !strings.HasPrefix(r.Message, "claim ns/second") {
			t.Errorf("reason %d: claim %q, message %q; want ns/second", i, r.Claim, r.Message)
		}
		if resA.Reasons[i].Claim != "ns/first" {
			t.Errorf("reason %d of the original changed: %q", i, resA.Reasons[i].Claim)
		}
	}
}

// TestCheckReusing: a node state keeps its last answer for a signature
// and gives it to the next request of that signature; another state, or
// a request of another signature, is checked anew. Reasons of answers
// kept for different earlier requests, rebound to one request, are one
// shared slice.
func TestCheckReusing(t *testing.T) {
	ctx := context.Background()
	mk := func(name, sel string) *Request {
		c := versioned(makeClaim(name, "gpu", sel))
		c[0].Claim.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: "ns"}
		return Prepare(nil, c)
	}
	model := wholeNode("n1", 2)
	free := NewNodeState(model, nil, nil)
	full := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("used", "n1", "gpu", "gpu-0", "gpu-1")})

	first, reused, err := CheckReusing(ctx, mk("a", "true"), free)
	if err != nil || reused || !first.Fits {
		t.Fatalf("first check: fits=%v reused=%v err=%v", first.Fits, reused, err)
	}
	second := mk("b", "true")
	got, reused, err := CheckReusing(ctx, second, free)
	if err != nil || !reused || !got.Fits {
		t.Fatalf("same signature on the same state: fits=%v reused=%v err=%v", got.Fits, reused, err)
	}
	if want, _ := Check(ctx, second, free); !reflect.DeepEqual(got.For(second).Build(), want.Build()) {
		t.Fatalf("the reused answer builds %v, Check %v", got.For(second).Build(), want.Build())
	}
	if _, reused, _ := CheckReusing(ctx, mk("c", "true"), free.WithAllocated()); reused {
		t.Fatal("another state object reused the answer")
	}
	if _, reused, _ := CheckReusing(ctx, mk("d", `quantities["memory"] >= "1Ti"`), free); reused {
		t.Fatal("a request of another signature reused the answer")
	}
	// The answer kept is the last one: d's, so c's signature is checked
	// again.
	if _, reused, _ := CheckReusing(ctx, mk("e", "true"), free); reused {
		t.Fatal("an answer replaced by another signature's was reused")
	}

	// Two full nodes remember rejections of two different pods; a third
	// pod gets both renamed to its claim, as one slice.
	full2 := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("used", "n1", "gpu", "gpu-0", "gpu-1")})
	if _, _, err := CheckReusing(ctx, mk("p1", "true"), full); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckReusing(ctx, mk("p2", "true"), full2); err != nil {
		t.Fatal(err)
	}
	third := mk("p3", "true")
	r1, reused1, _ := CheckReusing(ctx, third, full)
	r2, reused2, _ := CheckReusing(ctx, third, full2)
	if !reused1 || !reused2 || r1.Fits || r2.Fits {
		t.Fatalf("full nodes: reused %v %v, fits %v %v", reused1, reused2, r1.Fits, r2.Fits)
	}
	a, b := r1.For(third).Reasons, r2.For(third).Reasons
	if len(a) != 1 || len(b) != 1 || &a[0] != &b[0] {
		t.Fatalf("the rebound reasons of two nodes are not one slice: %v %v", a, b)
	}
	if a[0].Claim != "ns/p3" || !strings.HasPrefix(a[0].Message, "claim ns/p3") {
		t.Fatalf("rebound reason %q names %q, want ns/p3", a[0].Message, a[0].Claim)
	}
}
