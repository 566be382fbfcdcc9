package noderesources

import (
	"context"
	"math/bits"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// Score implements framework.ScorePlugin.
func (f *Fit) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s := readState(state, pod)
	return ScoreNode(f.strategy, s.request, s.nonZero, ni), nil
}

// ScoreNode is the pure score of a node for a pod, in [0, 100]: the
// average over cpu, memory and every scalar resource the pod requests of
// the share left free (LeastAllocated) or used (MostAllocated) once the
// pod is placed. Cpu and memory count PodRequestsNonZero so that pods
// without requests still spread.
func ScoreNode(strategy Strategy, req, nonZero framework.Resource, ni *framework.NodeInfo) int64 {
	alloc, used, usedNZ := ni.Allocatable(), ni.Requested(), ni.NonZeroRequested()
	var sum, n int64
	add := func(requested, capacity int64) {
		sum += share(strategy, requested, capacity)
		n++
	}
	add(corev1.AddAmounts(usedNZ.MilliCPU, nonZero.MilliCPU), alloc.MilliCPU)
	add(corev1.AddAmounts(usedNZ.Memory, nonZero.Memory), alloc.Memory)
	for name, v := range req.Scalar {
		if v > 0 {
			add(corev1.AddAmounts(used.Scalar[name], v), alloc.Scalar[name])
		}
	}
	return sum / n
}

func share(strategy Strategy, requested, capacity int64) int64 {
	if capacity <= 0 {
		return 0
	}
	requested = min(max(requested, 0), capacity)
	if strategy == MostAllocated {
		return scaled(requested, capacity)
	}
	return scaled(capacity-requested, capacity)
}

// scaled is part*MaxNodeScore/whole for 0 <= part <= whole, computed in
// 128 bits: the product overflows an int64 for amounts above 2^63/100.
func scaled(part, whole int64) int64 {
	hi, lo := bits.Mul64(uint64(part), uint64(framework.MaxNodeScore))
	q, _ := bits.Div64(hi, lo, uint64(whole))
	return int64(q)
}
