package queue

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("scheduling queue closed")

// Location is where a pod is.
type Location string

// Locations. A pod is in at most one.
const (
	Active        Location = "active"
	Backoff       Location = "backoff"
	Unschedulable Location = "unschedulable"
	Gated         Location = "gated"
	InFlight      Location = "in-flight"
	Absent        Location = ""
)

// QueuedPod is a pending pod and its queueing history. Between Pop and
// the call that ends the attempt the caller owns it; it must not be
// changed.
type QueuedPod struct {
	Pod *corev1.Pod
	// Timestamp is when the pod last entered the queue; it orders pods of
	// equal priority (older first).
	Timestamp time.Time
	// InitialTimestamp is when the pod first entered the queue.
	InitialTimestamp time.Time
	// Attempts counts scheduling attempts (Pops).
	Attempts int
	// RejectedBy are the plugins that rejected the pod (or made it wait)
	// in its last attempt.
	RejectedBy []string

	waiting      bool
	errored      bool // in backoff after an error (or a PostFilter's retry): never popped early
	backoffUntil time.Time
}

// Options configure a Queue.
type Options struct {
	// InitialBackoff after the first failed attempt doubles per attempt
	// up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// UnschedulableTimeout is the safety net: a pod parked as
	// unschedulable longer than this is retried even without an event
	// (0: never).
	UnschedulableTimeout time.Duration
	// Events are the framework's EventsToRegister.
	Events map[string][]framework.ClusterEventWithHint
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Metrics, if set, is told the queue lengths after every change
	// (under the queue's lock: it must be quick and must not call back).
	// Gated pods count as unschedulable.
	Metrics func(active, backoff, unschedulable int)
	// Gate, if set, is asked whether a pod that enters the queue (Add, or
	// an Update of a pod that is not queued) can be tried at all; a pod
	// it refuses is held as gated, never tried and never parked, until an
	// Update of the pod passes the gate (Kubernetes' PreEnqueue). It runs
	// under the queue's lock: it must be cheap and pure.
	Gate func(*corev1.Pod) bool
}

// flight is a popped pod whose attempt has not ended. Changes to the pod
// and cluster events that arrive meanwhile are recorded so that the
// attempt's verdict cannot park the pod on stale information.
type flight struct {
	qp      *QueuedPod
	seq     uint64
	latest  *corev1.Pod
	updated bool
	deleted bool
}

type recordedEvent struct {
	seq      uint64
	ev       framework.ClusterEvent
	old, new any
}

// Queue holds the pods waiting to be scheduled. It is safe for
// concurrent use.
type Queue struct {
	opts Options

	mu            sync.Mutex
	cond          *sync.Cond
	closed        bool
	active        *podHeap
	backoff       *podHeap
	unschedulable map[types.UID]*QueuedPod
	gated         map[types.UID]*QueuedPod
	inFlight      map[types.UID]*flight
	events        []recordedEvent
	seq           uint64
	wake          chan struct{}
}

// New returns an empty queue.
func New(o Options) *Queue {
	if o.Now == nil {
		o.Now = time.Now
	}
	q := &Queue{
		opts:          o,
		active:        newPodHeap(activeLess),
		backoff:       newPodHeap(func(a, b *QueuedPod) bool { return a.backoffUntil.Before(b.backoffUntil) }),
		unschedulable: map[types.UID]*QueuedPod{},
		gated:         map[types.UID]*QueuedPod{},
		inFlight:      map[types.UID]*flight{},
		wake:          make(chan struct{}, 1),
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// activeLess orders by priority (higher first), then by Timestamp.
func activeLess(a, b *QueuedPod) bool {
	pa, pb := priority(a.Pod), priority(b.Pod)
	if pa != pb {
		return pa > pb
	}
	return a.Timestamp.Before(b.Timestamp)
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// Add queues a new pending pod (or refreshes the one queued).
func (q *Queue) Add(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.report()
	if f := q.inFlight[pod.UID]; f != nil {
		f.latest = pod
		return
	}
	if q.refresh(pod) {
		return
	}
	now := q.opts.Now()
	qp := &QueuedPod{Pod: pod, Timestamp: now, InitialTimestamp: now}
	if q.opts.Gate != nil && !q.opts.Gate(pod) {
		q.gated[pod.UID] = qp
		return
	}
	q.active.push(qp)
	q.cond.Signal()
}

// Regate asks the gate again about a gated pod, after a change the gate
// depends on that is not a change of the pod; a pod that now passes
// becomes active.
func (q *Queue) Regate(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.gated[uid]
	if !ok || q.opts.Gate == nil || !q.opts.Gate(qp.Pod) {
		return
	}
	delete(q.gated, uid)
	qp.Timestamp = q.opts.Now()
	q.active.push(qp)
	q.cond.Signal()
	q.report()
}

// refresh replaces the pod object of a queued pod, keeping its place; a
// gated pod that now passes the gate becomes active.
func (q *Queue) refresh(pod *corev1.Pod) bool {
	if qp, ok := q.gated[pod.UID]; ok {
		qp.Pod = pod
		if q.opts.Gate(pod) {
			delete(q.gated, pod.UID)
			qp.Timestamp = q.opts.Now()
			q.active.push(qp)
			q.cond.Signal()
		}
		return true
	}
	if qp, ok := q.active.get(pod.UID); ok {
		qp.Pod = pod
		q.active.fix(pod.UID)
		return true
	}
	if qp, ok := q.backoff.get(pod.UID); ok {
		qp.Pod = pod
		return true
	}
	if qp, ok := q.unschedulable[pod.UID]; ok {
		qp.Pod = pod
		return true
	}
	return false
}

// Update handles a change to a pending pod. A change to its spec, labels
// or annotations may make it schedulable, so a parked pod moves back; a
// status-only change (such as the scheduler's own condition) does not.
func (q *Queue) Update(oldPod, newPod *corev1.Pod) {
	q.mu.Lock()
	changed := podChanged(oldPod, newPod)
	if f := q.inFlight[newPod.UID]; f != nil {
		f.latest = newPod
		f.updated = f.updated || changed
		q.mu.Unlock()
		return
	}
	if qp, ok := q.unschedulable[newPod.UID]; ok && changed {
		qp.Pod = newPod
		delete(q.unschedulable, newPod.UID)
		q.requeue(qp)
		q.report()
		q.mu.Unlock()
		return
	}
	if q.refresh(newPod) {
		q.report()
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.Add(newPod)
}

// podChanged: a change to the spec, labels or annotations, or the claim
// controller recording a template's claim (status.resourceClaimStatuses),
// which a pod waiting in DynamicResources needs.
func podChanged(a, b *corev1.Pod) bool {
	return !equality.Semantic.DeepEqual(a.Spec, b.Spec) ||
		!equality.Semantic.DeepEqual(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Annotations, b.Annotations) ||
		!equality.Semantic.DeepEqual(a.Status.ResourceClaimStatuses, b.Status.ResourceClaimStatuses)
}

// Delete forgets a pod: it was deleted, bound by someone else, or is no
// longer this scheduler's. An attempt in flight is dropped when it ends.
func (q *Queue) Delete(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.report()
	if f := q.inFlight[pod.UID]; f != nil {
		f.deleted = true
	}
	q.active.remove(pod.UID)
	q.backoff.remove(pod.UID)
	delete(q.unschedulable, pod.UID)
	delete(q.gated, pod.UID)
}

// Pop blocks until a pod is active and returns it, in flight: the caller
// must end the attempt with exactly one of Done, Unschedulable or
// Backoff. It fails with ErrClosed once the queue is closed.
func (q *Queue) Pop() (*QueuedPod, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.len() == 0 && !q.closed {
		if qp := q.earlyFromBackoff(); qp != nil {
			q.active.push(qp)
			break
		}
		q.cond.Wait()
	}
	if q.closed {
		return nil, ErrClosed
	}
	qp, _ := q.active.pop()
	qp.Attempts++
	q.inFlight[qp.Pod.UID] = &flight{qp: qp, seq: q.seq}
	q.report()
	return qp, nil
}

// earlyFromBackoff takes out of backoff, when no pod is active, the pod
// whose backoff ends first among those an event moved there (as
// kube-scheduler does since SchedulerPopFromBackoffQ): backoff keeps a
// busy scheduler fair to other pods, and an idle one has no other pods.
// A pod whose attempt failed with an error keeps its backoff. nil when
// there is none.
func (q *Queue) earlyFromBackoff() *QueuedPod {
	var best *QueuedPod
	for _, qp := range q.backoff.items {
		if !qp.errored && (best == nil || qp.backoffUntil.Before(best.backoffUntil)) {
			best = qp
		}
	}
	if best == nil {
		return nil
	}
	q.backoff.remove(best.Pod.UID)
	return best
}

// Close wakes every Pop with ErrClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// Where tells where a pod is.
func (q *Queue) Where(uid types.UID) Location {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.inFlight[uid] != nil:
		return InFlight
	case q.unschedulable[uid] != nil:
		return Unschedulable
	case q.gated[uid] != nil:
		return Gated
	}
	if _, ok := q.active.get(uid); ok {
		return Active
	}
	if _, ok := q.backoff.get(uid); ok {
		return Backoff
	}
	return Absent
}

// Len returns how many pods are active, backing off and unschedulable
// (parked or gated).
func (q *Queue) Len() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.len(), q.backoff.len(), len(q.unschedulable) + len(q.gated)
}

func (q *Queue) report() {
	if q.opts.Metrics != nil {
		q.opts.Metrics(q.active.len(), q.backoff.len(), len(q.unschedulable)+len(q.gated))
	}
}
