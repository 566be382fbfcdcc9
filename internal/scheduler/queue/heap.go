package queue

import (
	"container/heap"

	"k8s.io/apimachinery/pkg/types"
)

// podHeap is a heap of queued pods that can also find and remove a pod by
// UID. Not safe for concurrent use; the Queue's lock guards it.
type podHeap struct {
	items []*QueuedPod
	index map[types.UID]int
	less  func(a, b *QueuedPod) bool
}

func newPodHeap(less func(a, b *QueuedPod) bool) *podHeap {
	return &podHeap{index: map[types.UID]int{}, less: less}
}

// heap.Interface, on a private adapter so the public methods stay typed.
type heapAdapter struct{ h *podHeap }

func (a heapAdapter) Len() int           { return len(a.h.items) }
func (a heapAdapter) Less(i, j int) bool { return a.h.less(a.h.items[i], a.h.items[j]) }
func (a heapAdapter) Swap(i, j int) {
	h := a.h
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].Pod.UID] = i
	h.index[h.items[j].Pod.UID] = j
}
func (a heapAdapter) Push(x any) {
	qp := x.(*QueuedPod)
	a.h.index[qp.Pod.UID] = len(a.h.items)
	a.h.items = append(a.h.items, qp)
}
func (a heapAdapter) Pop() any {
	h := a.h
	last := len(h.items) - 1
	qp := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	delete(h.index, qp.Pod.UID)
	return qp
}

func (h *podHeap) len() int { return len(h.items) }

// push adds qp, or replaces the entry with the same UID.
func (h *podHeap) push(qp *QueuedPod) {
	if i, ok := h.index[qp.Pod.UID]; ok {
		h.items[i] = qp
		heap.Fix(heapAdapter{h}, i)
		return
	}
	heap.Push(heapAdapter{h}, qp)
}

func (h *podHeap) get(uid types.UID) (*QueuedPod, bool) {
	i, ok := h.index[uid]
	if !ok {
		return nil, false
	}
	return h.items[i], true
}

// fix restores the order after the entry of uid changed.
func (h *podHeap) fix(uid types.UID) {
	if i, ok := h.index[uid]; ok {
		heap.Fix(heapAdapter{h}, i)
	}
}

func (h *podHeap) remove(uid types.UID) (*QueuedPod, bool) {
	i, ok := h.index[uid]
	if !ok {
		return nil, false
	}
	return heap.Remove(heapAdapter{h}, i).(*QueuedPod), true
}

func (h *podHeap) peek() (*QueuedPod, bool) {
	if len(h.items) == 0 {
		return nil, false
	}
	return h.items[0], true
}

func (h *podHeap) pop() (*QueuedPod, bool) {
	if len(h.items) == 0 {
		return nil, false
	}
	return heap.Pop(heapAdapter{h}).(*QueuedPod), true
}
