package allocator

import (
	"context"
	"fmt"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// v1tBenchCluster is 8 nodes, each with 8 GPUs (NUMA 0 or 1), 4 NICs
// (NUMA 0 or 1) and a pool of 2 partitionable GPUs as shared counters
// (whole, 2 halves or 4 quarters each); on every node a GPU of NUMA 0 and
// a half partition are in use.
func v1tBenchCluster() (*State, []*corev1.Node) {
	st, nodes, _ := v1tBenchClusterClaims()
	return st, nodes
}

// v1tBenchClusterClaims is v1tBenchCluster with the claims in use.
func v1tBenchClusterClaims() (*State, []*corev1.Node, []*resourcev1.ResourceClaim) {
	var slices_ []*resourcev1.ResourceSlice
	var inUse []*resourcev1.ResourceClaim
	var nodes []*corev1.Node
	for n := range 8 {
		node := fmt.Sprintf("node-%d", n)
		nodes = append(nodes, v1tNode(node))
		var gpus, nics []resourcev1.Device
		for i := range 8 {
			gpus = append(gpus, v1tDev(fmt.Sprintf("gpu-%d", i), v1tStr("model", "a100"), v1tInt("topology.example.com/numa", int64(i/4)),
				v1tCap("memory", "80Gi")))
		}
		for i := range 4 {
			nics = append(nics, v1tDev(fmt.Sprintf("nic-%d", i), v1tInt("topology.example.com/numa", int64(i/2))))
		}
		var parts []resourcev1.Device
		var counters []*resourcev1.ResourceSlice
		for g := range 2 {
			set := fmt.Sprintf("gpu-%d", g)
			counters = append(counters, v1tCounterSlice(node+"-c"+set, v1tGPU, node+"-mig", node, set, "memory=40Gi"))
			mig := v1tStr("model", "a100-mig")
			parts = append(parts, v1tDev(set+"-whole", mig, v1tCap("memory", "40Gi"), v1tConsumes(set, "memory=40Gi")))
			for h := range 2 {
				parts = append(parts, v1tDev(fmt.Sprintf("%s-half-%d", set, h), mig, v1tCap("memory", "20Gi"), v1tConsumes(set, "memory=20Gi")))
			}
			for q := range 4 {
				parts = append(parts, v1tDev(fmt.Sprintf("%s-quarter-%d", set, q), mig, v1tCap("memory", "10Gi"), v1tConsumes(set, "memory=10Gi")))
			}
		}
		slices_ = append(slices_, v1tSlice(node+"-gpus", v1tGPU, node, node, gpus...), v1tSlice(node+"-nics", v1tNIC, node+"-nics", node, nics...))
		slices_ = append(slices_, v1tSliceCount(3, append(counters, v1tSlice(node+"-mig", v1tGPU, node+"-mig", node, parts...))...)...)
		inUse = append(inUse, v1tAllocated("old-"+node, node, v1tGPU+"/"+node+"/gpu-0", v1tGPU+"/"+node+"-mig/gpu-0-half-0"))
	}
	inv := NewInventory(slices_, nil)
	return NewState(inv, inUse, nil), nodes, inUse
}

// v1tBenchClaims: two GPUs and a NIC on one NUMA node, and a quarter.
func v1tBenchClaims() []V1Claim {
	return v1tClaims(
		v1tConstrain(v1tClaim("train",
			v1tExact("gpu", "gpu", 2, `device.attributes["gpu.example.com"].model == "a100"`),
			v1tExact("nic", "nic", 1)),
			v1tMatch("topology.example.com/numa")),
		v1tClaim("slice", v1tExact("part", "gpu", 1, `device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) == 0`)),
	)
}

// BenchmarkAllocateV1 allocates a pod with a two-request claim under a
// matchAttribute constraint and a claim for a partition from a pool with
// shared counters, on each of 8 nodes in turn: ns/op is per node. "cold"
// evaluates every selector afresh (a new inventory per op), as for the
// first pod after the slices changed.
func BenchmarkAllocateV1(b *testing.B) {
	st, nodes, inUse := v1tBenchClusterClaims()
	classes := v1tClassFunc(v1tClasses())
	req := PrepareV1(nil, v1tBenchClaims(), classes)
	ctx := context.Background()
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			res, err := AllocateV1(ctx, req, st, nodes[i%len(nodes)])
			if err != nil || !res.Fits {
				b.Fatalf("%v %v", err, res.Reasons)
			}
			i++
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			b.StopTimer()
			// The same devices in a new index, whose selector caches
			// are empty.
			fresh := NewState(engine.NewInventory(st.Inventory().Pools(), st.Inventory().Problems()), inUse, nil)
			b.StartTimer()
			res, err := AllocateV1(ctx, req, fresh, nodes[i%len(nodes)])
			if err != nil || !res.Fits {
				b.Fatalf("%v %v", err, res.Reasons)
			}
			i++
		}
	})
	b.Run("does-not-fit", func(b *testing.B) {
		// Five GPUs and a NIC of one NUMA node: NUMA 0 has 3 free GPUs,
		// NUMA 1 has 4 (the partitions have no NUMA attribute).
		big := PrepareV1(nil, v1tClaims(v1tConstrain(v1tClaim("big",
			v1tExact("gpu", "gpu", 5), v1tExact("nic", "nic", 1)), v1tMatch("topology.example.com/numa"))), classes)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			res, err := AllocateV1(ctx, big, st, nodes[i%len(nodes)])
			if err != nil || res.Fits {
				b.Fatalf("%v %v", err, res.Fits)
			}
			i++
		}
	})
}

// BenchmarkAllocateV1Shares allocates a claim of two requests, each a
// 30G share of bandwidth, on nodes of 4 shareable 100G NICs of which 3
// hold shares of other claims already: ns/op is per node. It is what
// consumable capacity costs when used; BenchmarkAllocateV1 shows what it
// costs when not.
func BenchmarkAllocateV1Shares(b *testing.B) {
	var slices_ []*resourcev1.ResourceSlice
	var held []*resourcev1.ResourceClaim
	var nodes []*corev1.Node
	for n := range 8 {
		node := fmt.Sprintf("node-%d", n)
		nodes = append(nodes, v1tNode(node))
		var nics []resourcev1.Device
		for i := range 4 {
			d := v1tDev(fmt.Sprintf("nic-%d", i), v1tInt("topology.example.com/numa", int64(i/2)))
			d.AllowMultipleAllocations = ptr(true)
			d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: resource.MustParse("100G"),
				RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(resource.MustParse("10G")),
					ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(resource.MustParse("10G")), Step: ptr(resource.MustParse("10G"))}}}}
			nics = append(nics, d)
			if i < 3 {
				c := v1tAllocated(fmt.Sprintf("held-%s-%d", node, i), node, v1tNIC+"/"+node+"/"+d.Name)
				r := &c.Status.Allocation.Devices.Results[0]
				r.ShareID = ptr(v1ShareID(c, "r", r.Device))
				r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse(fmt.Sprintf("%dG", 20*(i+1)))}
				held = append(held, c)
			}
		}
		slices_ = append(slices_, v1tSlice(node+"-nics", v1tNIC, node, node, nics...))
	}
	st := NewState(NewInventory(slices_, nil), held, nil)
	share := func(name string) resourcev1.DeviceRequest {
		r := v1tExact(name, "nic", 1)
		r.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("30G")}}
		return r
	}
	req := PrepareV1(nil, v1tClaims(v1tClaim("shares", share("a"), share("b"))), v1tClassFunc(v1tClasses()))
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
