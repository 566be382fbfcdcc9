package allocator

import (
	"reflect"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// SplitObjects puts each kind in its Snapshot list, keeps pods in input
// order, takes unstructured objects as vendor parameters and counts the
// rest by kind.
func TestSplitObjects(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	slice := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	classParams := &resourceapi.ResourceClassParameters{ObjectMeta: metav1.ObjectMeta{Name: "cp"}}
	claimParams := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "rc"}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	vendor := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gpu.example.com/v1", "kind": "GpuClaimParameters"}}
	podA := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	podB := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace"}}
	untyped := &corev1.Namespace{} // no kind set: counted by Go type

	snap, pods, ignored := SplitObjects([]runtime.Object{podB, node, slice, class, classParams, claimParams, claim, tmpl, vendor, ns, podA, ns, untyped})
	want := &Snapshot{
		Nodes: []*corev1.Node{node}, Slices: []*resourceapi.NodeResourceSlice{slice},
		Classes: []*resourceapi.ResourceClass{class}, ClassParameters: []*resourceapi.ResourceClassParameters{classParams},
		ClaimParameters: []*resourceapi.ResourceClaimParameters{claimParams}, Claims: []*resourceapi.ResourceClaim{claim},
		ClaimTemplates: []*resourceapi.ResourceClaimTemplate{tmpl}, VendorParameters: []*unstructured.Unstructured{vendor},
	}
	if !reflect.DeepEqual(snap, want) {
		t.Errorf("snapshot = %+v, want %+v", snap, want)
	}
	if len(pods) != 2 || pods[0] != podB || pods[1] != podA {
		t.Errorf("pods = %v, want b then a", pods)
	}
	if wantIgnored := map[string]int{"Namespace": 2, "*v1.Namespace": 1}; !reflect.DeepEqual(ignored, wantIgnored) {
		t.Errorf("ignored = %v, want %v", ignored, wantIgnored)
	}
}
