package client

import (
	"container/list"
	"context"
	"fmt"
	"hash/fnv"
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
	eventQueueSize      = 2000 // over all writers
	eventCacheSize      = 4096 // over all writers
	eventWriters        = 8
	eventWriteTimeout   = 10 * time.Second
	eventMaxNameLength  = 253
	eventMaxMessageSize = 4096
	eventMaxReasonSize  = 1024
)

// EventRecorder writes core/v1 Events about objects for people to read
// (`allot describe`, `allot get events`). Eventf never blocks: events go
// into bounded queues that writer goroutines drain, and are dropped when
// a queue is full. The events of one object always go to the same writer,
// so they are written in order. Repeats of the same (object, type,
// reason, message) bump count and lastTimestamp of the existing Event
// instead of creating one.
type EventRecorder struct {
	c         *Client
	component string
	host      string
	now       func() time.Time

	mu      sync.RWMutex // guards closed against sends on a closed queue
	closed  bool
	writers []*eventWriter
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	dropped atomic.Int64
}

// eventWriter is one writer goroutine's queue and memory of the Events
// it wrote.
type eventWriter struct {
	queue chan *corev1.Event
	seen  *eventCache // owned by the writer goroutine
}

// NewEventRecorder starts a recorder that reports as component on host
// (source.component and source.host of its Events). Call Shutdown to stop
// it.
func NewEventRecorder(c *Client, component, host string) *EventRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &EventRecorder{c: c, component: component, host: host, now: time.Now, ctx: ctx, cancel: cancel}
	for range eventWriters {
		w := &eventWriter{queue: make(chan *corev1.Event, eventQueueSize/eventWriters), seen: newEventCache(eventCacheSize / eventWriters)}
		r.writers = append(r.writers, w)
		r.wg.Add(1)
		go r.run(w)
	}
	return r
}

// writerOf picks the writer of an object's events.
func (r *EventRecorder) writerOf(ref corev1.ObjectReference) *eventWriter {
	h := fnv.New32a()
	h.Write([]byte(ref.Namespace))
	h.Write([]byte{0})
	h.Write([]byte(ref.Name))
	return r.writers[h.Sum32()%uint32(len(r.writers))]
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
	case r.writerOf(ref).queue <- ev:
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
		for _, w := range r.writers {
			close(w.queue)
		}
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.cancel()
		<-done
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

func (r *EventRecorder) run(w *eventWriter) {
	defer r.wg.Done()
	for ev := range w.queue {
		if r.ctx.Err() != nil {
			r.dropped.Add(1)
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, eventWriteTimeout)
		if err := r.write(ctx, w.seen, ev); err != nil {
			r.dropped.Add(1)
		}
		cancel()
	}
}

// write creates the event, or bumps the Event already written for the
// same key.
func (r *EventRecorder) write(ctx context.Context, seen *eventCache, ev *corev1.Event) error {
	key := eventKey{ref: ev.InvolvedObject, typ: ev.Type, reason: ev.Reason, message: ev.Message}
	key.ref.ResourceVersion = ""
	events := r.c.Events(ev.Namespace)
	if prev := seen.get(key); prev != nil {
		out, err := r.bump(ctx, events, prev, ev.LastTimestamp)
		if err == nil {
			seen.put(key, out)
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
	seen.put(key, out)
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
