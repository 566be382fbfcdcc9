package framework

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "allot.dev/allot/api/core/v1"
)

// Defaults counted for a container without a cpu or memory request when
// scoring (never when filtering), as kube-scheduler does: otherwise pods
// without requests would all pile onto one node.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resource is an amount of cpu (millicores), memory (bytes), pods and
// scalar resources (every other name: extended resources such as
// example.com/gpu in whole units, ephemeral-storage and hugepages in
// bytes).
type Resource struct {
	MilliCPU int64
	Memory   int64
	Pods     int64
	Scalar   map[corev1.ResourceName]int64
}

// NewResource converts a ResourceList.
func NewResource(rl corev1.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		r.addQuantity(name, q)
	}
	return r
}

// addQuantity adds an amount read with corev1.Amount: amounts never
// wrap around, even for quantities stored before validation bounded them.
func (r *Resource) addQuantity(name corev1.ResourceName, q resource.Quantity) {
	v := corev1.Amount(name, q)
	switch name {
	case corev1.ResourceCPU:
		r.MilliCPU = corev1.AddAmounts(r.MilliCPU, v)
	case corev1.ResourceMemory:
		r.Memory = corev1.AddAmounts(r.Memory, v)
	case corev1.ResourcePods:
		r.Pods = corev1.AddAmounts(r.Pods, v)
	default:
		r.SetScalar(name, corev1.AddAmounts(r.Scalar[name], v))
	}
}

// SetScalar sets one scalar resource.
func (r *Resource) SetScalar(name corev1.ResourceName, v int64) {
	if r.Scalar == nil {
		r.Scalar = map[corev1.ResourceName]int64{}
	}
	r.Scalar[name] = v
}

// Add adds o to r. A sum stops at math.MaxInt64 instead of wrapping
// around: no node has that much, so a saturated sum never fits.
func (r *Resource) Add(o Resource) {
	r.MilliCPU = corev1.AddAmounts(r.MilliCPU, o.MilliCPU)
	r.Memory = corev1.AddAmounts(r.Memory, o.Memory)
	r.Pods = corev1.AddAmounts(r.Pods, o.Pods)
	for name, v := range o.Scalar {
		r.SetScalar(name, corev1.AddAmounts(r.Scalar[name], v))
	}
}

// Sub subtracts o from r, stopping at 0: after a saturated Add, r may
// hold less than the amounts added to it.
func (r *Resource) Sub(o Resource) {
	r.MilliCPU = subAmounts(r.MilliCPU, o.MilliCPU)
	r.Memory = subAmounts(r.Memory, o.Memory)
	r.Pods = subAmounts(r.Pods, o.Pods)
	for name, v := range o.Scalar {
		r.SetScalar(name, subAmounts(r.Scalar[name], v))
	}
}

func subAmounts(a, b int64) int64 { return max(a-b, 0) }

// Max raises each amount of r to at least o's.
func (r *Resource) Max(o Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.Pods = max(r.Pods, o.Pods)
	for name, v := range o.Scalar {
		if v > r.Scalar[name] {
			r.SetScalar(name, v)
		}
	}
}

// IsZero reports whether r asks for nothing.
func (r Resource) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.Pods != 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v != 0 {
			return false
		}
	}
	return true
}

// Get returns the amount of one resource in the unit of its field.
func (r Resource) Get(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourcePods:
		return r.Pods
	}
	return r.Scalar[name]
}

// Clone returns a deep copy.
func (r Resource) Clone() Resource {
	r.Scalar = maps.Clone(r.Scalar)
	return r
}

// PodRequests returns what a pod asks of its node: the sum over its
// containers, raised to the largest init container (init containers run
// one at a time, before the others). A container's request defaults to its
// limit, as the API server defaults it. Pods is always 1.
func PodRequests(pod *corev1.Pod) Resource {
	return podRequests(pod, false)
}

// PodRequestsNonZero is PodRequests with DefaultMilliCPURequest and
// DefaultMemoryRequest for containers that request no cpu or memory; it
// is used for scoring only.
func PodRequestsNonZero(pod *corev1.Pod) Resource {
	return podRequests(pod, true)
}

func podRequests(pod *corev1.Pod, nonZero bool) Resource {
	var sum Resource
	for i := range pod.Spec.Containers {
		sum.Add(containerRequests(&pod.Spec.Containers[i], nonZero))
	}
	for i := range pod.Spec.InitContainers {
		sum.Max(containerRequests(&pod.Spec.InitContainers[i], nonZero))
	}
	sum.Pods = 1
	return sum
}

func containerRequests(c *corev1.Container, nonZero bool) Resource {
	var r Resource
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			r.addQuantity(name, q)
		}
	}
	for name, q := range c.Resources.Requests {
		r.addQuantity(name, q)
	}
	if nonZero {
		if _, ok := requestOrLimit(c, corev1.ResourceCPU); !ok {
			r.MilliCPU = DefaultMilliCPURequest
		}
		if _, ok := requestOrLimit(c, corev1.ResourceMemory); !ok {
			r.Memory = DefaultMemoryRequest
		}
	}
	return r
}

func requestOrLimit(c *corev1.Container, name corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := c.Resources.Requests[name]; ok {
		return q, true
	}
	q, ok := c.Resources.Limits[name]
	return q, ok
}
