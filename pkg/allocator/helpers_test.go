package allocator

import (
	"fmt"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fixture builders for the allocator's tests.

func makeSlice(node, driver string, p *resourceapi.PartitionableResources) *resourceapi.NodeResourceSlice {
	return &resourceapi.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.NodeResourceSliceSpec{NodeName: node, DriverName: driver,
			NodeResourceModel: resourceapi.NodeResourceModel{Partitionable: p}},
	}
}

func allocatedClaim(name, node, driver string, ids ...string) *resourceapi.ResourceClaim {
	var inst []resourceapi.AllocatedResourceInstance
	for _, id := range ids {
		inst = append(inst, resourceapi.AllocatedResourceInstance{ID: id})
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			AvailableOnNodes: nodeNameSelector(node),
			ResourceHandles: []resourceapi.ResourceHandle{{DriverName: driver, StructuredData: &resourceapi.StructuredResourceHandle{
				NodeName: node, Partitionable: &resourceapi.PartitionableAllocationResult{Instances: inst},
			}}},
		}},
	}
}

// makeClaim is an unallocated claim whose parameters require one instance
// per selector from driver.
func makeClaim(name, driver string, selectors ...string) Claim {
	var req []resourceapi.PartitionableResourceRequest
	for i, s := range selectors {
		req = append(req, resourceapi.PartitionableResourceRequest{Name: fmt.Sprintf("r%d", i), Selector: s})
	}
	return Claim{
		Claim: &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "cls"}},
		Class: &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "cls"}, DriverName: driver},
		ClaimParameters: &resourceapi.ResourceClaimParameters{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Requests: []resourceapi.ResourceRequest{{DriverName: driver, ResourceRequestModel: resourceapi.ResourceRequestModel{
				Partitionable: &resourceapi.PartitionableResourceRequests{Required: req}}}},
		},
	}
}

func quantityAttr(name, q string) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{Quantity: ptr(resource.MustParse(q))}}
}

func stringAttr(name, s string) resourceapi.Attribute {
	return resourceapi.Attribute{Name: name, AttributeValue: resourceapi.AttributeValue{String: ptr(s)}}
}

// gpuInstance is a GPU usable whole, as two halves or as four quarters.
func gpuInstance(name string) resourceapi.ResourceInstance {
	group := func(g string, mem string, n int) resourceapi.ResourceInstanceGroup {
		out := resourceapi.ResourceInstanceGroup{Name: g}
		for i := range n {
			out.ResourceInstances = append(out.ResourceInstances, resourceapi.ResourceInstance{
				Name: fmt.Sprintf("%s-%d", g, i), Attributes: []resourceapi.Attribute{quantityAttr("memory", mem)}})
		}
		return out
	}
	return resourceapi.ResourceInstance{
		Name: name, Attributes: []resourceapi.Attribute{stringAttr("uuid", "GPU-"+name)},
		Partitions: []resourceapi.ResourceInstanceGroup{group("full", "32Gi", 1), group("half", "16Gi", 2), group("quarter", "8Gi", 4)},
	}
}

// gpuNode is a node with n partitionable GPUs of driver "gpu".
func gpuNode(node string, n int) *Model {
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		p.ResourceInstances = append(p.ResourceInstances, gpuInstance(fmt.Sprintf("gpu-%d", i)))
	}
	return NewModel(node, []*resourceapi.NodeResourceSlice{makeSlice(node, "gpu", p)})
}

// wholeNode is a node with n unpartitioned instances of driver "gpu".
func wholeNode(node string, n int) *Model {
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		p.ResourceInstances = append(p.ResourceInstances, resourceapi.ResourceInstance{
			Name: fmt.Sprintf("gpu-%d", i), Attributes: []resourceapi.Attribute{quantityAttr("memory", "32Gi"), stringAttr("uuid", fmt.Sprint("GPU-", i))}})
	}
	return NewModel(node, []*resourceapi.NodeResourceSlice{makeSlice(node, "gpu", p)})
}
