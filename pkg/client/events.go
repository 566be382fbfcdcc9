package client

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/scheme"
)

// EventRecorder limits. A repeated event (same object, type, reason and
// message) within the remembered set updates the existing Event.
const (
	eventQueueSize      = 1000
	eventCacheSize      = 4096
	eventWriteTimeout   = 10 * time.Second
	eventMaxNameLength  = 253
	eventMaxMessageSize = 4096
	eventMaxReasonSize  = 1024
)

// EventRecorder writes core/v1 Events about objects for people to read
// (`allot describe`, `allot get events`). Eventf never blocks: events go
// into a bounded queue that one goroutine drains, and are dropped when the
// queue is full. Repeats of the same (object, type, reason, message) bump
// count and lastTimestamp of the existing Event instead of creating one.
type EventRecorder struct {
	c         *Client
	component string
	host      string
	now       func() time.Time

	mu      sync.RWMutex // guards closed against sends on a closed queue
	closed  bool
	queue   chan *corev1.Event
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	dropped atomic.Int64

	// seen is owned by the writer goroutine.
	seen *eventCache
}

// NewEventRecorder starts a recorder that reports as component on host
// (source.component and source.host of its Events). Call Shutdown to stop
// it.
func NewEventRecorder(c *Client, component, host string) *EventRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &EventRecorder{
		c: c, component: component, host: host, now: time.Now,
		queue: make(chan *corev1.Event, eventQueueSize),
		ctx:   ctx, cancel: cancel, done: make(chan struct{}),
		seen: newEventCache(eventCacheSize),
	}
	go r.run()
	return r
}

// Eventf records an event about obj. typ is corev1.EventTypeNormal or
// EventTypeWarning; reason is a short CamelCase word.
func (r *EventRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	ref, err := ObjectReference(obj)
	if err != nil {
		r.dropped.Add(1)
		return
	}
	ev := r.newEvent(ref, typ, reason, fmt.Sprintf(format, args...))
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.dropped.Add(1)
		return
	}
	select {
	case r.queue <- ev:
	default:
		r.dropped.Add(1)
	}
}

// Dropped counts events lost to a full queue, an object without metadata,
// a write error, or a stopped recorder.
func (r *EventRecorder) Dropped() int64 { return r.dropped.Load() }

// Shutdown stops accepting events and writes the queued ones, until ctx
// ends; then pending writes are abandoned.
func (r *EventRecorder) Shutdown(ctx context.Context) {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
	}
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		r.cancel()
		<-r.done
	}
	r.cancel()
}

// ObjectReference builds the involvedObject of an event about obj. The
// kind comes from obj's TypeMeta, else from scheme.Scheme.
func ObjectReference(obj runtime.Object) (corev1.ObjectReference, error) {
	acc, err := metaAccessor(obj)
	if err != nil {
		return corev1.ObjectReference{}, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		kinds, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil || len(kinds) == 0 {
			return corev1.ObjectReference{}, fmt.Errorf("find kind of %T: %w", obj, err)
		}
		gvk = kinds[0]
	}
	return corev1.ObjectReference{
		Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(),
		Namespace: acc.GetNamespace(), Name: acc.GetName(), UID: string(acc.GetUID()),
		ResourceVersion: acc.GetResourceVersion(),
	}, nil
}

func (r *EventRecorder) newEvent(ref corev1.ObjectReference, typ, reason, msg string) *corev1.Event {
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ts := metav1.NewTime(r.now())
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns},
		InvolvedObject: ref, Type: typ,
		Reason:         truncate(reason, eventMaxReasonSize),
		Message:        truncate(msg, eventMaxMessageSize),
		Source:         corev1.EventSource{Component: r.component, Host: r.host},
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
		ReportingController: r.component, ReportingInstance: r.host,
	}
}

func (r *EventRecorder) run() {
	defer close(r.done)
	for ev := range r.queue {
		if r.ctx.Err() != nil {
			r.dropped.Add(1)
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, eventWriteTimeout)
		if err := r.write(ctx, ev); err != nil {
			r.dropped.Add(1)
		}
		cancel()
	}
}

// write creates the event, or bumps the Event already written for the
// same key.
func (r *EventRecorder) write(ctx context.Context, ev *corev1.Event) error {
	key := eventKey{ref: ev.InvolvedObject, typ: ev.Type, reason: ev.Reason, message: ev.Message}
	key.ref.ResourceVersion = ""
	events := r.c.Events(ev.Namespace)
	if prev := r.seen.get(key); prev != nil {
		out, err := r.bump(ctx, events, prev, ev.LastTimestamp)
		if err == nil {
			r.seen.put(key, out)
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		// The event expired or was deleted: start over.
	}
	ev.Name = eventName(ev.InvolvedObject.Name, ev.LastTimestamp.Time)
	out, err := events.Create(ctx, ev)
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	r.seen.put(key, out)
	return nil
}

// bump updates prev's count and lastTimestamp, retrying once on conflict
// with a fresh read.
func (r *EventRecorder) bump(ctx context.Context, events *EventClient, prev *corev1.Event, at metav1.Time) (*corev1.Event, error) {
	cur := prev.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Count++
		cur.LastTimestamp = at
		out, err := events.Update(ctx, cur)
		if err == nil || !apierrors.IsConflict(err) || attempt > 0 {
			return out, err
		}
		if cur, err = events.Get(ctx, prev.Name); err != nil {
			return nil, err
		}
	}
}

func eventName(objName string, t time.Time) string {
	suffix := fmt.Sprintf(".%x", t.UnixNano())
	if max := eventMaxNameLength - len(suffix); len(objName) > max {
		objName = objName[:max]
	}
	return objName + suffix
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

type eventKey struct {
	ref     corev1.ObjectReference
	typ     string
	reason  string
	message string
}

// eventCache remembers the last written Event per key, least recently used
// first out. Not safe for concurrent use.
type eventCache struct {
	max   int
	order *list.List // of eventKey, most recent at the front
	items map[eventKey]*cacheEntry
}

type cacheEntry struct {
	ev  *corev1.Event
	pos *list.Element
}

func newEventCache(max int) *eventCache {
	return &eventCache{max: max, order: list.New(), items: map[eventKey]*cacheEntry{}}
}

func (c *eventCache) get(k eventKey) *corev1.Event {
	e, ok := c.items[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e.pos)
	return e.ev
}

func (c *eventCache) put(k eventKey, ev *corev1.Event) {
	if e, ok := c.items[k]; ok {
		e.ev = ev
		c.order.MoveToFront(e.pos)
		return
	}
	c.items[k] = &cacheEntry{ev: ev, pos: c.order.PushFront(k)}
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(eventKey))
	}
}
