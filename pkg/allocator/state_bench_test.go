package allocator

import (
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
)

// BenchmarkStateV1 is the one state's work on BenchmarkDRA's v1 shape
// (500 nodes with a ResourceSlice of 10 GPUs, 2,500 claims allocated
// one GPU each): "count" counts every claim into a new state, as a front
// end does for a new inventory or listing (ns/op per state); "derive"
// derives the state after one more claim from the last, as the
// scheduler does per claim event (ns/op per claim), restarting from the
// counted state every 2,500 claims.
func BenchmarkStateV1(b *testing.B) {
	const nodes, perNode = 500, 10
	var slices_ []*resourcev1.ResourceSlice
	var held, more []*resourcev1.ResourceClaim
	for n := range nodes {
		node := fmt.Sprintf("node-%03d", n)
		slices_ = append(slices_, v1tSlice(node, v1tGPU, node, node, v1tGPUs(perNode, "a100")...))
		for i := range perNode {
			c := v1tAllocated(fmt.Sprintf("c-%s-%d", node, i), node, fmt.Sprintf("%s/%s/gpu-%d", v1tGPU, node, i))
			if i < perNode/2 {
				held = append(held, c)
			} else {
				more = append(more, c)
			}
		}
	}
	inv := NewInventory(slices_, nil)
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewState(inv, held, nil)
		}
	})
	b.Run("derive", func(b *testing.B) {
		base := NewState(inv, held, nil)
		st, i := base, 0
		b.ReportAllocs()
		for b.Loop() {
			if i == len(more) {
				st, i = base, 0
			}
			st = st.WithAllocated(more[i])
			i++
		}
	})
}
