package noderesources

import (
	"slices"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

const gpu = "example.com/gpu"

func TestFits(t *testing.T) {
	node := makeNode("n").Alloc("cpu", "4").Alloc("memory", "8Gi").Alloc(gpu, "2").Alloc("pods", "3")
	tests := map[string]struct {
		pod         schedtest.PodBuilder
		existing    []*corev1.Pod
		wantReasons []string
		wantDetail  string
	}{
		"fits":          {pod: makePod("p").Req("cpu", "2").Req("memory", "1Gi")},
		"no requests":   {pod: makePod("p")},
		"exactly full":  {pod: makePod("p").Req("cpu", "4").Req("memory", "8Gi")},
		"too much cpu":  {pod: makePod("p").Req("cpu", "5"), wantReasons: []string{"Insufficient cpu"}, wantDetail: "cpu: requested 5, free 4 of 4"},
		"millicores":    {pod: makePod("p").Req("cpu", "1500m"), existing: []*corev1.Pod{makePod("x").Req("cpu", "3").Obj()}, wantReasons: []string{"Insufficient cpu"}, wantDetail: "cpu: requested 1500m, free 1 of 4"},
		"taken cpu":     {pod: makePod("p").Req("cpu", "2"), existing: []*corev1.Pod{makePod("x").Req("cpu", "3").Obj()}, wantReasons: []string{"Insufficient cpu"}},
		"memory":        {pod: makePod("p").Req("memory", "9Gi"), wantReasons: []string{"Insufficient memory"}, wantDetail: "memory: requested 9Gi, free 8Gi of 8Gi"},
		"limit only":    {pod: makePod("p").Limit("cpu", "5"), wantReasons: []string{"Insufficient cpu"}},
		"extended fits": {pod: makePod("p").Req(gpu, "2").Limit(gpu, "2")},
		"extended short": {pod: makePod("p").Req(gpu, "1").Limit(gpu, "1"), existing: []*corev1.Pod{makePod("x").Req(gpu, "2").Obj()},
			wantReasons: []string{"Insufficient example.com/gpu"}, wantDetail: "example.com/gpu: requested 1, free 0 of 2"},
		"extended unknown": {pod: makePod("p").Req("example.com/fpga", "1"), wantReasons: []string{"Insufficient example.com/fpga"}},
		"too many pods": {pod: makePod("p"), existing: []*corev1.Pod{makePod("x").Obj(), makePod("y").Obj(), makePod("z").Obj()},
			wantReasons: []string{"Too many pods"}, wantDetail: "pods: 3 of 3 in use"},
		"several short": {pod: makePod("p").Req("cpu", "5").Req("memory", "9Gi").Req(gpu, "3"),
			wantReasons: []string{"Insufficient cpu", "Insufficient memory", "Insufficient example.com/gpu"}},
		"init container is the max": {pod: makePod("p").Req("cpu", "1").InitReq("cpu", "5"), wantReasons: []string{"Insufficient cpu"}},
		"init container below sum":  {pod: makePod("p").Req("cpu", "2").Container("cpu", "2").InitReq("cpu", "3")},
		"containers add up":         {pod: makePod("p").Req("cpu", "3").Container("cpu", "2"), wantReasons: []string{"Insufficient cpu"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ni := framework.NewNodeInfo(node.Obj(), tc.existing...)
			st := Fits(framework.PodRequests(tc.pod.Obj()), ni)
			if len(tc.wantReasons) == 0 {
				if !st.IsSuccess() {
					t.Fatalf("Fits = %v, want Success", st)
				}
				return
			}
			if st.Code() != framework.Unschedulable || !slices.Equal(st.Reasons(), tc.wantReasons) {
				t.Fatalf("Fits = %v, want Unschedulable %v", st, tc.wantReasons)
			}
			if tc.wantDetail != "" && st.Detail() != tc.wantDetail {
				t.Fatalf("detail = %q, want %q", st.Detail(), tc.wantDetail)
			}
		})
	}
}

func TestScoreNode(t *testing.T) {
	node := makeNode("n").Alloc("cpu", "4").Alloc("memory", "4Gi")
	half := []*corev1.Pod{makePod("x").Req("cpu", "2").Req("memory", "2Gi").Obj()}
	tests := map[string]struct {
		strategy Strategy
		pod      schedtest.PodBuilder
		existing []*corev1.Pod
		want     int64
	}{
		"least, empty node":      {LeastAllocated, makePod("p").Req("cpu", "1").Req("memory", "1Gi"), nil, 75},
		"least, half full":       {LeastAllocated, makePod("p").Req("cpu", "1").Req("memory", "1Gi"), half, 25},
		"most, empty node":       {MostAllocated, makePod("p").Req("cpu", "1").Req("memory", "1Gi"), nil, 25},
		"most, half full":        {MostAllocated, makePod("p").Req("cpu", "1").Req("memory", "1Gi"), half, 75},
		"least, over capacity":   {LeastAllocated, makePod("p").Req("cpu", "8").Req("memory", "8Gi"), nil, 0},
		"no requests use floors": {LeastAllocated, makePod("p"), nil, (97 + 95) / 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := tc.pod.Obj()
			ni := framework.NewNodeInfo(node.Obj(), tc.existing...)
			got := ScoreNode(tc.strategy, framework.PodRequests(pod), framework.PodRequestsNonZero(pod), ni)
			if got != tc.want {
				t.Fatalf("score = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestScoreCountsExtendedResources(t *testing.T) {
	pod := makePod("p").Req(gpu, "1").Obj()
	ni := framework.NewNodeInfo(makeNode("n").Alloc("cpu", "1").Alloc("memory", "1Gi").Alloc(gpu, "4").Obj())
	// cpu 100m of 1 -> 90, memory 200Mi of 1Gi -> 80, gpu 1 of 4 -> 75.
	if got := ScoreNode(LeastAllocated, framework.PodRequests(pod), framework.PodRequestsNonZero(pod), ni); got != (90+80+75)/3 {
		t.Fatalf("score = %d", got)
	}
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{"": LeastAllocated, "LeastAllocated": LeastAllocated, "MostAllocated": MostAllocated} {
		if got, err := ParseStrategy(in); err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseStrategy("leastallocated"); err == nil {
		t.Error("ParseStrategy accepted a wrong case")
	}
}

func TestNodeHint(t *testing.T) {
	pod := makePod("p").Req("cpu", "3").Obj()
	small, big := makeNode("n").Alloc("cpu", "2").Obj(), makeNode("n").Alloc("cpu", "4").Obj()
	relabeled := makeNode("n").Alloc("cpu", "2").Label("x", "y").Obj()
	tests := map[string]struct {
		old, new any
		want     framework.QueueingHint
	}{
		"big node added":     {nil, big, framework.Queue},
		"small node added":   {nil, small, framework.QueueSkip},
		"node grew":          {small, big, framework.Queue},
		"node relabeled":     {small, relabeled, framework.QueueSkip},
		"big node unchanged": {big, big, framework.QueueSkip},
	}
	for name, tc := range tests {
		if got := nodeMayFit(pod, tc.old, tc.new); got != tc.want {
			t.Errorf("%s: hint = %v, want %v", name, got, tc.want)
		}
	}
}

// Amounts beyond int64 (stored before validation bounded them, or at the
// bound) never wrap around in the fit check or the score.
func TestFitNeverOverflows(t *testing.T) {
	const maxUnits, maxMilli = "9223372036854775807", "9223372036854775807m"
	small := makeNode("n").Alloc("cpu", "2").Alloc("memory", "8Gi").Alloc(gpu, "2").Alloc("pods", "10")
	huge := makeNode("n").Alloc("cpu", maxMilli).Alloc("memory", maxUnits).Alloc(gpu, maxUnits).Alloc("pods", "10")
	// Sums stop at 2^63-1, so a node needs that much to hold a pod whose
	// amounts add up beyond it; one byte less holds neither.
	almost := makeNode("n").Alloc("memory", "9223372036854775806").Alloc("pods", "10")
	const half = "4611686018427387904" // 2^62
	tests := map[string]struct {
		node        schedtest.NodeBuilder
		pod         schedtest.PodBuilder
		existing    []*corev1.Pod
		wantReasons []string
	}{
		"cpu 1e400":          {node: small, pod: makePod("p").Req("cpu", "1e400"), wantReasons: []string{"Insufficient cpu"}},
		"cpu huge Ti":        {node: small, pod: makePod("p").Req("cpu", "99999999999999999999999Ti"), wantReasons: []string{"Insufficient cpu"}},
		"memory 1e400":       {node: small, pod: makePod("p").Req("memory", "1e400"), wantReasons: []string{"Insufficient memory"}},
		"extended 1e400":     {node: small, pod: makePod("p").Req(gpu, "1e400").Limit(gpu, "1e400"), wantReasons: []string{"Insufficient example.com/gpu"}},
		"containers add up":  {node: almost, pod: makePod("p").Req("memory", half).Container("memory", half), wantReasons: []string{"Insufficient memory"}},
		"at the bound fits":  {node: huge, pod: makePod("p").Req("cpu", maxMilli).Req("memory", maxUnits)},
		"full node, cpu":     {node: huge, pod: makePod("p").Req("cpu", "1"), existing: []*corev1.Pod{makePod("x").Req("cpu", maxMilli).Obj(), makePod("y").Req("cpu", maxMilli).Obj()}, wantReasons: []string{"Insufficient cpu"}},
		"full node, memory":  {node: huge, pod: makePod("p").Req("memory", "1"), existing: []*corev1.Pod{makePod("x").Req("memory", maxUnits).Obj(), makePod("y").Req("memory", "1e400").Obj()}, wantReasons: []string{"Insufficient memory"}},
		"full node, devices": {node: huge, pod: makePod("p").Req(gpu, "1").Limit(gpu, "1"), existing: []*corev1.Pod{makePod("x").Req(gpu, maxUnits).Obj(), makePod("y").Req(gpu, maxUnits).Obj()}, wantReasons: []string{"Insufficient example.com/gpu"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ni := framework.NewNodeInfo(tc.node.Obj(), tc.existing...)
			req := framework.PodRequests(tc.pod.Obj())
			st := Fits(req, ni)
			if len(tc.wantReasons) == 0 {
				if !st.IsSuccess() {
					t.Fatalf("Fits = %v, want Success", st)
				}
			} else if st.Code() != framework.Unschedulable || !slices.Equal(st.Reasons(), tc.wantReasons) {
				t.Fatalf("Fits = %v, want Unschedulable %v", st, tc.wantReasons)
			}
			for _, s := range []Strategy{LeastAllocated, MostAllocated} {
				if score := ScoreNode(s, req, framework.PodRequestsNonZero(tc.pod.Obj()), ni); score < 0 || score > framework.MaxNodeScore {
					t.Errorf("%s score %d outside [0, %d]", s, score, framework.MaxNodeScore)
				}
			}
		})
	}
}
