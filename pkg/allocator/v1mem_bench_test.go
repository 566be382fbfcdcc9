package allocator

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// v1tBenchSeedSlice is the seed NodeResourceSlice of BenchmarkDRA's nodes
// (internal/scheduler/schedtest.BenchSlice): ten instances of one driver
// with common attributes and a NUMA number each.
func v1tBenchSeedSlice(node string) *resourceapi.NodeResourceSlice {
	str := func(s string) resourceapi.AttributeValue { return resourceapi.AttributeValue{String: &s} }
	mem, version := resource.MustParse("1Gi"), "1.2.3"
	common := resourceapi.AttributeGroup{Name: "a100", Attributes: []resourceapi.Attribute{
		{Name: "model", AttributeValue: str("A100")},
		{Name: "family", AttributeValue: str("GPU")},
		{Name: "driverVersion", AttributeValue: resourceapi.AttributeValue{Version: &version}},
		{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: &mem}},
	}}
	s := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"}}
	s.Spec.NodeName, s.Spec.DriverName = node, "gpu"
	s.Spec.Partitionable = &resourceapi.PartitionableResources{CommonAttributes: []resourceapi.AttributeGroup{common}}
	for i := range 10 {
		numa := int64(i)
		s.Spec.Partitionable.ResourceInstances = append(s.Spec.Partitionable.ResourceInstances, resourceapi.ResourceInstance{
			Name: fmt.Sprintf("instance-%d", i), CommonAttributesRefs: []string{common.Name},
			Attributes: []resourceapi.Attribute{{Name: "numa", AttributeValue: resourceapi.AttributeValue{Int: &numa}}},
		})
	}
	return s
}

// BenchmarkAllocateV1SeedShape is BenchmarkDRA's v1 form on one node of
// its cluster: a claim for one device of the seed driver (class and claim
// selectors as BenchmarkDRA's) on nodes of ten projected seed instances,
// half of them held by v1 claims; ns/op, B/op and allocs/op are per node,
// which the scheduler pays on every node it filters.
func BenchmarkAllocateV1SeedShape(b *testing.B) {
	var seed []*resourceapi.NodeResourceSlice
	var held []*resourcev1.ResourceClaim
	var nodes []*corev1.Node
	for n := range 8 {
		node := fmt.Sprintf("node-%d", n)
		nodes = append(nodes, v1tNode(node))
		seed = append(seed, v1tBenchSeedSlice(node))
		for i := range 5 {
			held = append(held, v1tAllocated(fmt.Sprintf("held-%s-%d", node, i), node, fmt.Sprintf("gpu/%s/instance-%d", node, 2*i)))
		}
	}
	st := NewState(NewInventory(nil, seed), held, nil)
	class := v1tClass("gpu", `device.driver == "gpu" && device.attributes["gpu"].family == "GPU"`)
	req := PrepareV1(nil, v1tClaims(v1tClaim("c", v1tExact("gpu", "gpu", 1,
		`device.attributes["gpu"].model == "A100" && device.capacity["gpu"].memory.compareTo(quantity("1Gi")) >= 0`))),
		v1tClassFunc([]*resourcev1.DeviceClass{class}))
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := AllocateV1(ctx, req, st, nodes[i%len(nodes)])
		if err != nil || !res.Fits {
			b.Fatalf("%v %v", err, res.Reasons)
		}
		i++
	}
}

// BenchmarkV1InventorySeedShape builds the scheduler's v1 inventory of
// BenchmarkDRA's 500 nodes (ten projected seed instances each) over Models
// compiled beforehand, as the plugin's model cache holds them; retained-
// B/device is what the inventory keeps per device after a collection, the
// v1 form's share of the scheduler's live heap.
func BenchmarkV1InventorySeedShape(b *testing.B) {
	const nodes = 500
	var seed []*resourceapi.NodeResourceSlice
	for n := range nodes {
		seed = append(seed, v1tBenchSeedSlice(fmt.Sprintf("node-%03d", n)))
	}
	byNode := map[string][]*resourceapi.NodeResourceSlice{}
	for _, s := range seed {
		byNode[s.Spec.NodeName] = append(byNode[s.Spec.NodeName], s)
	}
	var retained uint64
	var ms runtime.MemStats
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		models := map[string]*Model{}
		for node, ss := range byNode {
			models[node] = NewModel(node, ss)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		b.StartTimer()
		inv := NewInventoryModels(nil, seed, func(node string, _ []*resourceapi.NodeResourceSlice) *Model { return models[node] })
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > before {
			retained += ms.HeapAlloc - before
		}
		if len(inv.Pools()) != nodes {
			b.Fatalf("%d pools, want %d", len(inv.Pools()), nodes)
		}
		runtime.KeepAlive(models)
		b.StartTimer()
	}
	b.ReportMetric(float64(retained)/float64(b.N)/(nodes*10), "retained-B/device")
}
