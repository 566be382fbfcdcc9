package allocator_test

import (
	"context"
	"fmt"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ExampleCompileSelector() {
	fmt.Println(allocator.CompileSelector(`quantities["memory"] >= "8Gi" && versions["runtime"] >= "v12"`))
	fmt.Println(allocator.CompileSelector(`quantities["memory"] >= "8Gx"`))
	// Output:
	// <nil>
	// invalid selector: 1:25: invalid quantity "8Gx": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'
}

// A GPU that can be used whole or as two halves, and a claim for one half.
func ExampleAllocate() {
	mem := func(q string) []resourceapi.Attribute {
		v := resource.MustParse(q)
		return []resourceapi.Attribute{{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: &v}}}
	}
	slice := &resourceapi.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1-gpus"},
		Spec: resourceapi.NodeResourceSliceSpec{NodeName: "worker-1", DriverName: "gpu.example.com",
			NodeResourceModel: resourceapi.NodeResourceModel{Partitionable: &resourceapi.PartitionableResources{
				ResourceInstances: []resourceapi.ResourceInstance{{
					Name: "gpu-0",
					Partitions: []resourceapi.ResourceInstanceGroup{
						{Name: "whole", ResourceInstances: []resourceapi.ResourceInstance{{Name: "gpu", Attributes: mem("32Gi")}}},
						{Name: "halves", ResourceInstances: []resourceapi.ResourceInstance{
							{Name: "half-0", Attributes: mem("16Gi")}, {Name: "half-1", Attributes: mem("16Gi")}}},
					},
				}},
			}}},
	}
	model := allocator.NewModel("worker-1", []*resourceapi.NodeResourceSlice{slice})
	state := allocator.NewNodeState(model, nil, nil)

	claim := allocator.Claim{
		Claim: &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "half", Namespace: "default"}},
		Class: &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, DriverName: "gpu.example.com"},
		ClaimParameters: &resourceapi.ResourceClaimParameters{Requests: []resourceapi.ResourceRequest{{
			DriverName: "gpu.example.com",
			ResourceRequestModel: resourceapi.ResourceRequestModel{Partitionable: &resourceapi.PartitionableResourceRequests{
				Required: []resourceapi.PartitionableResourceRequest{{Name: "gpu", Selector: `quantities["memory"] >= "16Gi"`}},
			}},
		}}},
	}
	res, err := allocator.Allocate(context.Background(), allocator.Prepare(nil, []allocator.Claim{claim}), state)
	if err != nil {
		panic(err)
	}
	h := res.Allocations[0].ResourceHandles[0]
	fmt.Println(res.Fits, h.StructuredData.NodeName, h.StructuredData.Partitionable.Instances[0].ID, res.Score)
	// Output: true worker-1 gpu-0/halves/half-0 50
}
