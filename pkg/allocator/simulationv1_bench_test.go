package allocator

import (
	"context"
	"fmt"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkSimulationV1 is BenchmarkSimulationClone's cluster (1000
// nodes of 4 partitionable seed GPUs, 4000 allocated seed claims) with a
// DeviceClass and a v1 claim for one quarter: a clone followed by binding
// the v1 pod, with the clone's inventory and state built (the common
// case of NodesNeeded and repeated what-ifs), and NodesNeeded for 20 v1
// pods on a template node of 4 GPUs.
func BenchmarkSimulationV1(b *testing.B) {
	snap := &Snapshot{Classes: []*resourceapi.ResourceClass{{ObjectMeta: metav1.ObjectMeta{Name: "cls"}, DriverName: "gpu"}},
		DeviceClasses: []*resourcev1.DeviceClass{v1tClass("seed", `device.driver == "gpu"`)}}
	for n := range 1000 {
		name := fmt.Sprintf("node-%04d", n)
		snap.Nodes = append(snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		snap.Slices = append(snap.Slices, gpuSlice(name, 4))
		for g := range 4 {
			snap.Claims = append(snap.Claims, allocatedClaim(fmt.Sprintf("%s-c%d", name, g), name, "gpu", fmt.Sprintf("gpu-%d/quarter/quarter-0", g)))
		}
	}
	quarter := `device.capacity["gpu"].memory.compareTo(quantity("8Gi")) == 0`
	snap.V1Claims = []*resourcev1.ResourceClaim{v1tClaim("new", v1tExact("gpu", "seed", 1, quarter))}
	snap.V1ClaimTemplates = []*resourcev1.ResourceClaimTemplate{{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{v1tExact("gpu", "seed", 1, quarter)}}}}}}
	sim := NewSimulation(snap, Options{})
	sim.v1State()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("new")}}}}
	b.Run("clone+bind", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := sim.Clone()
			if _, err := c.BindPod(context.Background(), pod, "node-0500"); err != nil {
				b.Fatal(err)
			}
		}
	})
	tmpl := NodeTemplate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl"}}, Slices: []*resourceapi.NodeResourceSlice{gpuSlice("tmpl", 4)}}
	var pending []*corev1.Pod
	for i := range 20 {
		pending = append(pending, podFromTemplate(fmt.Sprintf("q%d", i), "q"))
	}
	b.Run("nodes-needed-20", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			nn, err := sim.NodesNeeded(context.Background(), tmpl, pending, 100)
			if err != nil || nn.Nodes != 2 {
				b.Fatalf("%v %+v", err, nn)
			}
		}
	})
}
