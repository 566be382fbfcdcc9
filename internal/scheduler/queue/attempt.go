package queue

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/internal/scheduler/framework"
)

// Done ends a successful attempt: the pod was bound (or is no longer
// pending) and leaves the queue.
func (q *Queue) Done(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.land(uid)
}

// Unschedulable ends an attempt in which no node fit (or a plugin made
// the pod wait, with waiting set). rejectedBy are the plugins that said
// no; the pod is parked until one of their registered events arrives, or
// the safety net fires. If such an event, or a change to the pod, arrived
// while the attempt ran, the pod is retried at once (after backoff).
// Waiting pods skip backoff: they did not fail.
func (q *Queue) Unschedulable(qp *QueuedPod, rejectedBy []string, waiting bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.report()
	f := q.inFlight[qp.Pod.UID]
	q.prepare(qp, f)
	qp.RejectedBy, qp.waiting, qp.errored = rejectedBy, waiting, false
	retry := f != nil && (f.updated || q.missedEvent(qp, f.seq))
	q.land(qp.Pod.UID)
	switch {
	case q.closed || (f != nil && f.deleted):
	case retry:
		q.requeue(qp)
	default:
		q.unschedulable[qp.Pod.UID] = qp
	}
}

// Backoff ends an attempt that failed with an error (or that a
// PostFilter plugin expects to succeed soon): the pod is retried after
// its backoff.
func (q *Queue) Backoff(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.report()
	f := q.land(qp.Pod.UID)
	if q.closed || (f != nil && f.deleted) {
		return
	}
	q.prepare(qp, f)
	qp.RejectedBy, qp.waiting, qp.errored = nil, false, true
	q.requeue(qp)
}

// prepare takes the latest pod object and starts the backoff clock.
func (q *Queue) prepare(qp *QueuedPod, f *flight) {
	if f != nil && f.latest != nil {
		qp.Pod = f.latest
	}
	now := q.opts.Now()
	qp.Timestamp = now
	qp.backoffUntil = now.Add(q.backoffDuration(qp.Attempts))
}

// land ends the in-flight state of a pod and drops the recorded events no
// other flight needs.
func (q *Queue) land(uid types.UID) *flight {
	f := q.inFlight[uid]
	delete(q.inFlight, uid)
	if len(q.inFlight) == 0 {
		q.events = nil
		return f
	}
	oldest := q.seq
	for _, o := range q.inFlight {
		oldest = min(oldest, o.seq)
	}
	i := 0
	for i < len(q.events) && q.events[i].seq <= oldest {
		i++
	}
	q.events = q.events[i:]
	return f
}

func (q *Queue) missedEvent(qp *QueuedPod, since uint64) bool {
	for _, e := range q.events {
		if e.seq > since && q.wakes(qp, e.ev, e.old, e.new) {
			return true
		}
	}
	return false
}

// requeue puts a pod in active, or in backoff while its backoff runs.
func (q *Queue) requeue(qp *QueuedPod) {
	if qp.waiting || !q.opts.Now().Before(qp.backoffUntil) {
		q.active.push(qp)
		q.cond.Signal()
		return
	}
	q.backoff.push(qp)
	q.cond.Signal() // an idle Pop may take it early
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) backoffDuration(attempts int) time.Duration {
	d, hi := q.opts.InitialBackoff, q.opts.MaxBackoff
	for i := 1; i < attempts && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// OnEvent moves the parked pods that the event may help back to the
// queue: those rejected by a plugin that registered a matching event whose
// hint (if any) says Queue, and those no plugin rejected (no nodes). For
// Add oldObj is nil; for Delete newObj is nil.
func (q *Queue) OnEvent(ev framework.ClusterEvent, oldObj, newObj any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.inFlight) > 0 {
		q.seq++
		q.events = append(q.events, recordedEvent{seq: q.seq, ev: ev, old: oldObj, new: newObj})
	}
	moved := false
	for uid, qp := range q.unschedulable {
		if q.wakes(qp, ev, oldObj, newObj) {
			delete(q.unschedulable, uid)
			q.requeue(qp)
			moved = true
		}
	}
	if moved {
		q.report()
	}
}

func (q *Queue) wakes(qp *QueuedPod, ev framework.ClusterEvent, oldObj, newObj any) bool {
	if len(qp.RejectedBy) == 0 {
		return true
	}
	for _, plugin := range qp.RejectedBy {
		for _, reg := range q.opts.Events[plugin] {
			if !reg.Event.Match(ev) {
				continue
			}
			if reg.Hint == nil || reg.Hint(qp.Pod, oldObj, newObj) == framework.Queue {
				return true
			}
		}
	}
	return false
}
