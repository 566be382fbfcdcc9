package queue

import (
	"context"
	"time"
)

// Flush moves pods whose backoff has ended to active, and pods parked
// longer than the safety-net period back to the queue. Run calls it; tests
// with a fake clock call it directly.
func (q *Queue) Flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Now()
	moved := false
	for {
		qp, ok := q.backoff.peek()
		if !ok || qp.backoffUntil.After(now) {
			break
		}
		q.backoff.pop()
		q.active.push(qp)
		q.cond.Signal()
		moved = true
	}
	if t := q.opts.UnschedulableTimeout; t > 0 {
		for uid, qp := range q.unschedulable {
			if now.Sub(qp.Timestamp) >= t {
				delete(q.unschedulable, uid)
				q.requeue(qp)
				moved = true
			}
		}
	}
	if moved {
		q.report()
	}
}

// nextBackoff is how long until the first backoff ends (ok false: none).
func (q *Queue) nextBackoff() (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.backoff.peek()
	if !ok {
		return 0, false
	}
	return qp.backoffUntil.Sub(q.opts.Now()), true
}

// SweepInterval is how often Run looks for pods parked longer than the
// safety-net period: a tenth of it, between 10ms and 30s.
func SweepInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 10*time.Millisecond), 30*time.Second)
}

// Run moves pods out of backoff when their backoff ends and runs the
// safety net, until ctx ends; then it closes the queue.
func (q *Queue) Run(ctx context.Context) {
	defer q.Close()
	var sweep <-chan time.Time
	if t := q.opts.UnschedulableTimeout; t > 0 {
		tk := time.NewTicker(SweepInterval(t))
		defer tk.Stop()
		sweep = tk.C
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.Flush()
		d, ok := q.nextBackoff()
		if !ok {
			d = time.Hour
		}
		timer.Reset(max(d, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-sweep:
		case <-q.wake:
		}
	}
}
