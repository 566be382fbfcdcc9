package node

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/pkg/client"
)

// dispatcher keeps one pod worker per pod UID and feeds it the pod's
// updates. It owns the workers map; workers own their pods.
type dispatcher struct {
	cfg *pods.Config
	ctx context.Context

	mu      sync.Mutex
	workers map[types.UID]*workerEntry
	byName  map[string]types.UID                    // NAMESPACE/NAME → UID
	initial map[types.UID][]runtime.ContainerStatus // found at start, for adoption
	wg      sync.WaitGroup
}

type workerEntry struct {
	w       *pods.Worker
	deleted bool // the informer reported the pod deleted
	exited  bool // the worker's Run returned
}

func newDispatcher(ctx context.Context, cfg *pods.Config, initial []runtime.ContainerStatus) *dispatcher {
	d := &dispatcher{
		cfg: cfg, ctx: ctx,
		workers: map[types.UID]*workerEntry{}, byName: map[string]types.UID{},
		initial: map[types.UID][]runtime.ContainerStatus{},
	}
	for _, c := range initial {
		uid := types.UID(c.PodUID)
		d.initial[uid] = append(d.initial[uid], c)
	}
	return d
}

// update hands a pod to its worker, starting one for a new pod.
func (d *dispatcher) update(pod *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.workers[pod.UID]; ok {
		if !e.exited {
			e.w.Update(pod)
		}
		return
	}
	if d.ctx.Err() != nil {
		return
	}
	w := pods.New(d.cfg, pod, d.initial[pod.UID])
	delete(d.initial, pod.UID)
	d.workers[pod.UID] = &workerEntry{w: w}
	d.byName[pod.Namespace+"/"+pod.Name] = pod.UID
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		w.Run(d.ctx)
		d.exited(pod)
	}()
}

// remove tells a pod's worker that the pod left the API.
func (d *dispatcher) remove(pod *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.workers[pod.UID]
	if !ok {
		return
	}
	e.deleted = true
	if e.exited {
		d.forget(pod)
		return
	}
	e.w.Gone()
}

// exited is called when a worker's Run returns. A worker that finished
// before the informer reported the deletion stays as a tombstone, so late
// updates of the pod do not start a new worker.
func (d *dispatcher) exited(pod *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.workers[pod.UID]
	if !ok {
		return
	}
	e.exited = true
	if e.deleted {
		d.forget(pod)
	}
}

// forget drops a pod's entry; d.mu is held.
func (d *dispatcher) forget(pod *corev1.Pod) {
	delete(d.workers, pod.UID)
	key := pod.Namespace + "/" + pod.Name
	if d.byName[key] == pod.UID {
		delete(d.byName, key)
	}
}

// poke wakes the worker of uid; it reports whether one is alive.
func (d *dispatcher) poke(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.workers[uid]
	if !ok || e.exited {
		return false
	}
	e.w.Poke()
	return true
}

// pokeAll wakes every live worker.
func (d *dispatcher) pokeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.workers {
		if !e.exited {
			e.w.Poke()
		}
	}
}

// liveUIDs returns the UIDs of the pods whose workers have not ended.
func (d *dispatcher) liveUIDs() []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]types.UID, 0, len(d.workers))
	for uid, e := range d.workers {
		if !e.exited {
			out = append(out, uid)
		}
	}
	return out
}

// has reports whether uid has a live worker.
func (d *dispatcher) has(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.workers[uid]
	return ok && !e.exited
}

// lookup returns the snapshot of the pod NAMESPACE/NAME.
func (d *dispatcher) lookup(ns, name string) (*pods.Snapshot, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	uid, ok := d.byName[ns+"/"+name]
	if !ok {
		return nil, false
	}
	e, ok := d.workers[uid]
	if !ok {
		return nil, false
	}
	return e.w.Snapshot(), true
}

// leftovers returns the containers found at start whose pods the informer
// never delivered, and forgets them.
func (d *dispatcher) leftovers() []runtime.ContainerStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []runtime.ContainerStatus
	for _, cs := range d.initial {
		out = append(out, cs...)
	}
	d.initial = map[types.UID][]runtime.ContainerStatus{}
	return out
}

// uids returns the UIDs of the pods with an entry (live or tombstone).
func (d *dispatcher) uids() map[types.UID]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]bool, len(d.workers))
	for uid := range d.workers {
		out[uid] = true
	}
	return out
}

// wait blocks until every worker has returned (after ctx ended).
func (d *dispatcher) wait() { d.wg.Wait() }

// handler adapts informer events, including deletion tombstones.
func (d *dispatcher) handler() cache.ResourceEventHandler {
	return client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.onUpdate(obj) },
		UpdateFunc: func(_, obj any) { d.onUpdate(obj) },
		DeleteFunc: d.onDelete,
	})
}

func (d *dispatcher) onUpdate(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		d.update(pod)
	}
}

func (d *dispatcher) onDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		d.remove(pod)
	}
}
