package noderesources

import (
	"slices"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// draNames is a DRAClasses serving the names it lists.
type draNames []corev1.ResourceName

func (d draNames) ServesExtendedResource(name corev1.ResourceName) bool {
	return slices.Contains(d, name)
}

// An extended resource that the node's allocatable lacks and a DeviceClass
// maps is DRA's to judge; where the node's device plugin advertises the
// name, it is judged here as before.
func TestFitsWithDRA(t *testing.T) {
	const dc = "deviceclass.resource.kubernetes.io/gpu"
	dra := draNames{gpu, dc}
	withPlugin := makeNode("dp").Alloc("cpu", "4").Alloc(gpu, "1").Alloc("pods", "10").Obj()
	without := makeNode("dra").Alloc("cpu", "4").Alloc("pods", "10").Obj()
	for name, tc := range map[string]struct {
		pod         *corev1.Pod
		node        *corev1.Node
		dra         DRAClasses
		wantReasons []string
	}{
		"served by DRA":            {pod: makePod("p").Req(gpu, "3").Limit(gpu, "3").Obj(), node: without, dra: dra},
		"device class name":        {pod: makePod("p").Req(dc, "2").Limit(dc, "2").Obj(), node: without, dra: dra},
		"no class maps it":         {pod: makePod("p").Req("example.com/fpga", "1").Obj(), node: without, dra: dra, wantReasons: []string{"Insufficient example.com/fpga"}},
		"no DRA objects":           {pod: makePod("p").Req(gpu, "1").Obj(), node: without, wantReasons: []string{"Insufficient example.com/gpu"}},
		"device plugin serves it":  {pod: makePod("p").Req(gpu, "1").Obj(), node: withPlugin, dra: dra},
		"device plugin runs short": {pod: makePod("p").Req(gpu, "2").Obj(), node: withPlugin, dra: dra, wantReasons: []string{"Insufficient example.com/gpu"}},
		"cpu still counts":         {pod: makePod("p").Req(gpu, "1").Req("cpu", "5").Obj(), node: without, dra: dra, wantReasons: []string{"Insufficient cpu"}},
	} {
		t.Run(name, func(t *testing.T) {
			st := FitsWithDRA(framework.PodRequests(tc.pod), framework.NewNodeInfo(tc.node), tc.dra)
			if len(tc.wantReasons) == 0 {
				if !st.IsSuccess() {
					t.Fatalf("FitsWithDRA = %v, want Success", st)
				}
				return
			}
			if st.Code() != framework.Unschedulable || !slices.Equal(st.Reasons(), tc.wantReasons) {
				t.Fatalf("FitsWithDRA = %v, want Unschedulable %v", st, tc.wantReasons)
			}
		})
	}
}
