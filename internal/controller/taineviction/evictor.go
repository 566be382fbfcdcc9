package taineviction

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// The eviction path shared by the node taint controller here and the
// device taint controller (internal/controller/devicetainteviction): one
// Limiter paces every pod deletion of both, and EvictPod does what an
// eviction is, the DisruptionTarget condition and a graceful delete with
// a UID precondition. Each controller keeps its own reasons, events and
// metrics, named as Kubernetes names its own controller's.

// Defaults of the eviction rate limit (--pod-eviction-qps,
// --pod-eviction-burst).
const (
	DefaultEvictionQPS   = 10
	DefaultEvictionBurst = 50
)

// Limiter paces pod evictions: a token bucket refilled qps times a second
// holding at most burst tokens. A rule or node taint that reaches every
// pod in a cluster empties it at this pace, not at once. Safe for
// concurrent use; a nil *Limiter limits nothing.
type Limiter struct {
	mu sync.Mutex
	l  *rate.Limiter
}

// NewLimiter returns a limiter of qps evictions a second with bursts of
// burst (at least 1); qps <= 0 returns nil, no limit.
func NewLimiter(qps float64, burst int) *Limiter {
	if qps <= 0 {
		return nil
	}
	return &Limiter{l: rate.NewLimiter(rate.Limit(qps), max(burst, 1))}
}

// Take takes a token for one eviction at now and returns 0, or returns
// how long to wait before asking again and takes nothing. The caller
// requeues the pod for that long rather than blocking a worker, so a
// taint removed meanwhile still cancels the eviction.
func (l *Limiter) Take(now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.l.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// Eviction says why a pod is evicted: the DisruptionTarget condition's
// reason and message.
type Eviction struct {
	Reason  string
	Message string
}

// EvictPod marks pod with the DisruptionTarget condition and deletes it
// gracefully, on the condition that it is still the same pod (its UID).
// It reports false, and no error, when there was nothing to do: the pod
// is gone, replaced, or already being deleted.
func EvictPod(ctx context.Context, c *client.Client, pod *corev1.Pod, ev Eviction, now time.Time) (bool, error) {
	if pod.DeletionTimestamp != nil {
		return false, nil
	}
	q := pod.DeepCopy()
	cond := corev1.PodCondition{Type: ConditionDisruptionTarget, Status: corev1.ConditionTrue, Reason: ev.Reason,
		Message: ev.Message, LastTransitionTime: metav1.NewTime(now)}
	if i := slices.IndexFunc(q.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == ConditionDisruptionTarget }); i >= 0 {
		q.Status.Conditions[i] = cond
	} else {
		q.Status.Conditions = append(q.Status.Conditions, cond)
	}
	if _, err := c.Pods(pod.Namespace).UpdateStatus(ctx, q); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("mark pod %s/%s for eviction: %w", pod.Namespace, pod.Name, err)
	}
	uid := pod.UID
	err := c.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return true, nil
}
