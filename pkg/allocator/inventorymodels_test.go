package allocator_test

import (
	"reflect"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInventorySharesSeedModels checks that an inventory built over the
// caller's Models (as the scheduler builds it, over the Models its seed
// path allocates on) asks for each node's Model once and equals the one
// that compiles the slices itself: one compiled model of the seed slices
// for both APIs.
func TestInventorySharesSeedModels(t *testing.T) {
	mem := resource.MustParse("16Gi")
	slice := func(node, driver string, leaves ...string) *resourceapi.NodeResourceSlice {
		card := resourceapi.ResourceInstance{Name: "card", Partitions: []resourceapi.ResourceInstanceGroup{{Name: "parts"}}}
		for _, l := range leaves {
			card.Partitions[0].ResourceInstances = append(card.Partitions[0].ResourceInstances, resourceapi.ResourceInstance{
				Name: l, Attributes: []resourceapi.Attribute{{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: &mem}}}})
		}
		return &resourceapi.NodeResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver, Generation: 3},
			Spec: resourceapi.NodeResourceSliceSpec{NodeName: node, DriverName: driver, NodeResourceModel: resourceapi.NodeResourceModel{
				Partitionable: &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{card}}}},
		}
	}
	seed := []*resourceapi.NodeResourceSlice{
		slice("node-a", "gpu.example.com", "half-0", "half-1"),
		slice("node-a", "nic.example.com", "port-0"),
		slice("node-b", "gpu.example.com", "half-0", "bad/name"),
	}
	calls := map[string]int{}
	shared := allocator.NewInventoryModels(nil, seed, func(node string, ss []*resourceapi.NodeResourceSlice) *allocator.Model {
		calls[node]++
		return allocator.NewModel(node, ss)
	})
	if want := map[string]int{"node-a": 1, "node-b": 1}; !reflect.DeepEqual(calls, want) {
		t.Errorf("Models asked for: %v, want %v", calls, want)
	}
	own := allocator.NewInventory(nil, seed)
	if !reflect.DeepEqual(shared.Pools(), own.Pools()) {
		t.Errorf("pools differ:\nshared %+v\nown    %+v", shared.Pools(), own.Pools())
	}
	if !reflect.DeepEqual(shared.Problems(), own.Problems()) {
		t.Errorf("problems differ:\nshared %v\nown    %v", shared.Problems(), own.Problems())
	}
	if len(own.Pools()) != 3 || len(own.Problems()) == 0 {
		t.Errorf("the case lost its point: %d pools, problems %v", len(own.Pools()), own.Problems())
	}
}
