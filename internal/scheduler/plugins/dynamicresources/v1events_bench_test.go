package dynamicresources_test

import (
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
)

// BenchmarkV1ClaimEvent is the scheduler's cost of one v1 claim event
// (WithClaimChanges, then the base state the next cycle reads) in a
// cluster of 5,000 v1 claims: a claim allocated, then freed.
func BenchmarkV1ClaimEvent(b *testing.B) {
	const n = 5000
	claims := make([]*resourcev1.ResourceClaim, n)
	for i := range claims {
		claims[i] = v1Claim(fmt.Sprintf("c-%d", i))
	}
	o := dynamicresources.NewObjects(v1GPUs(claims...))
	dynamicresources.V1InUse(o, driver, "n1", "gpu-0")
	held, free := v1OnGPU("c-0", "n1", "gpu-0", ""), v1Claim("c-0")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c := held
		if i%2 == 1 {
			c = free
		}
		o = o.WithClaimChanges(fmt.Sprint(20+i), dynamicresources.ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/c-0": c}})
		dynamicresources.V1InUse(o, driver, "n1", "gpu-0")
	}
}
