package dra

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// sliceName is the name of the slice the Manager creates for (node,
// driver): readable, and with a hash so that two pairs never share it.
func sliceName(node, driver string) string {
	sum := sha256.Sum256([]byte(node + "/" + driver))
	suffix := hex.EncodeToString(sum[:4])
	prefix := node + "-" + driver
	if limit := 253 - 1 - len(suffix); len(prefix) > limit {
		prefix = strings.TrimRight(prefix[:limit], "-.")
	}
	return prefix + "-" + suffix
}

// sliceWant is what a driver's slice should be: the model to publish, or
// removed. Neither (a driver found at start, not registered yet) keeps
// the slice as it is.
type sliceWant struct {
	model  *resourcev1alpha2.NodeResourceModel
	remove bool
	seq    uint64 // counts published models, so tests can tell what synced
}

// slicePublisher writes the node's slices from the drivers' models, one
// driver at a time through a rate-limited queue keyed by driver name.
type slicePublisher struct {
	m     *Manager
	queue workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	want   map[string]sliceWant
	events map[string][]sliceEvent // from the informer, not merged yet
	synced map[string]uint64       // seq of the model last found published
	seq    uint64

	// have is the worker's view of this node's slices, by driver, the one
	// to keep first: its own writes' results, merged with the informer's
	// events. Only the worker goroutine touches it.
	have map[string][]*resourcev1alpha2.NodeResourceSlice
}

func newSlicePublisher(m *Manager) *slicePublisher {
	return &slicePublisher{
		m: m, want: map[string]sliceWant{}, events: map[string][]sliceEvent{}, synced: map[string]uint64{},
		have: map[string][]*resourcev1alpha2.NodeResourceSlice{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](m.opts.BackoffInitial, m.opts.BackoffMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dra-slices"}),
	}
}

// publish asks for driver's slice to hold model.
func (p *slicePublisher) publish(driver string, model *resourcev1alpha2.NodeResourceModel) {
	p.mu.Lock()
	p.seq++
	p.want[driver] = sliceWant{model: model, seq: p.seq}
	p.mu.Unlock()
	p.queue.Add(driver)
}

// remove asks for driver's slices to be deleted.
func (p *slicePublisher) remove(driver string) {
	p.mu.Lock()
	p.want[driver] = sliceWant{remove: true}
	p.mu.Unlock()
	p.queue.Add(driver)
}

// syncedSeq returns the seq of driver's model last found published.
func (p *slicePublisher) syncedSeq(driver string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced[driver]
}

// run syncs queued drivers until ctx ends.
func (p *slicePublisher) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for {
		driver, quit := p.queue.Get()
		if quit {
			return
		}
		err := p.sync(ctx, driver)
		switch {
		case err == nil:
			p.queue.Forget(driver)
		case ctx.Err() == nil:
			p.m.log.Warn("DRA manager: sync slice, will retry", "driver", driver, "err", err)
			p.queue.AddRateLimited(driver)
		}
		p.queue.Done(driver)
	}
}

// sliceEvent is a change of one of this node's slices, seen by the
// informer.
type sliceEvent struct {
	slice   *resourcev1alpha2.NodeResourceSlice
	deleted bool
}

// observe hands the worker a slice event of the informer (which lists
// and watches this node's slices): the worker merges it into its view at
// the driver's next sync, so slices that others created, changed or
// deleted are noticed.
func (p *slicePublisher) observe(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	s, ok := obj.(*resourcev1alpha2.NodeResourceSlice)
	if !ok || s.Spec.NodeName != p.m.opts.NodeName {
		return
	}
	driver := s.Spec.DriverName
	p.mu.Lock()
	p.events[driver] = append(p.events[driver], sliceEvent{slice: s, deleted: deleted})
	p.mu.Unlock()
	p.queue.Add(driver)
}

// merge applies the informer's events of driver to the worker's view. A
// slice of a driver that is not registered gets a grace period for the
// driver to register (at start, every slice found).
func (p *slicePublisher) merge(driver string) {
	p.mu.Lock()
	evs := p.events[driver]
	delete(p.events, driver)
	p.mu.Unlock()
	canonical := sliceName(p.m.opts.NodeName, driver)
	for _, ev := range evs {
		ss := p.have[driver]
		i := slices.IndexFunc(ss, func(s *resourcev1alpha2.NodeResourceSlice) bool { return s.Name == ev.slice.Name })
		switch {
		case ev.deleted:
			if i >= 0 && ss[i].UID == ev.slice.UID {
				ss = slices.Delete(ss, i, i+1)
			}
		case i >= 0:
			if newerRV(ev.slice.ResourceVersion, ss[i].ResourceVersion) {
				ss[i] = ev.slice
			}
		case ev.slice.Name == canonical:
			ss = append([]*resourcev1alpha2.NodeResourceSlice{ev.slice}, ss...)
		default:
			ss = append(ss, ev.slice)
		}
		p.have[driver] = ss
		if !ev.deleted {
			p.m.drivers.startGrace(driver, p.m.opts.SliceGracePeriod, func() { p.remove(driver) })
		}
	}
	if len(p.have[driver]) == 0 {
		delete(p.have, driver)
	}
}

// newerRV reports whether resourceVersion a is newer than b. allot's
// resource versions are etcd revisions; anything else counts as newer.
func newerRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 != nil || err2 != nil || x > y
}

// sync makes driver's slices what is wanted.
func (p *slicePublisher) sync(ctx context.Context, driver string) error {
	p.merge(driver)
	p.mu.Lock()
	w, ok := p.want[driver]
	p.mu.Unlock()
	switch {
	case ok && w.remove:
		if err := p.deleteFrom(ctx, driver, 0); err != nil {
			return err
		}
		p.mu.Lock()
		if cur, ok := p.want[driver]; ok && cur.remove {
			delete(p.want, driver)
		}
		p.mu.Unlock()
		return nil
	case ok && w.model != nil:
		if err := p.ensure(ctx, driver, w.model); err != nil {
			return err
		}
		p.mu.Lock()
		p.synced[driver] = max(p.synced[driver], w.seq)
		p.mu.Unlock()
		return nil
	}
	return p.deleteFrom(ctx, driver, 1)
}

// ensure makes the driver's one slice hold model: created when missing,
// updated in place when different, left alone when equal. Other slices
// of the driver are deleted.
func (p *slicePublisher) ensure(ctx context.Context, driver string, model *resourcev1alpha2.NodeResourceModel) error {
	uid, _, err := p.m.node.get(ctx)
	if err != nil {
		return err
	}
	if err := p.deleteFrom(ctx, driver, 1); err != nil {
		return err
	}
	spec := resourcev1alpha2.NodeResourceSliceSpec{NodeName: p.m.opts.NodeName, DriverName: driver, NodeResourceModel: *model.DeepCopy()}
	owners := []metav1.OwnerReference{nodeOwner(p.m.opts.NodeName, uid)}
	actx, cancel := p.m.apiContext(ctx)
	defer cancel()
	client := p.m.opts.Client.NodeResourceSlices()
	if len(p.have[driver]) == 0 {
		s := &resourcev1alpha2.NodeResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: sliceName(p.m.opts.NodeName, driver), OwnerReferences: owners},
			Spec:       spec,
		}
		out, err := client.Create(actx, s)
		if apierrors.IsAlreadyExists(err) {
			return p.reread(actx, driver, s.Name)
		}
		if err != nil {
			return fmt.Errorf("create slice: %w", err)
		}
		p.m.metrics.sliceWrites.WithLabelValues("create").Inc()
		p.have[driver] = []*resourcev1alpha2.NodeResourceSlice{out}
		return nil
	}
	cur := p.have[driver][0]
	if equality.Semantic.DeepEqual(cur.Spec, spec) && equality.Semantic.DeepEqual(cur.OwnerReferences, owners) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Spec, upd.OwnerReferences = spec, owners
	out, err := client.Update(actx, upd)
	switch {
	case apierrors.IsConflict(err):
		return p.reread(actx, driver, cur.Name)
	case apierrors.IsNotFound(err):
		p.have[driver] = p.have[driver][1:]
		p.m.node.forget() // the Node and its slices may have been re-created
		return fmt.Errorf("update slice %s: %w", cur.Name, err)
	case err != nil:
		return fmt.Errorf("update slice %s: %w", cur.Name, err)
	}
	p.m.metrics.sliceWrites.WithLabelValues("update").Inc()
	p.have[driver][0] = out
	return nil
}

// errStale asks for another sync after the cached slice was refreshed.
var errStale = errors.New("cached slice was stale")

// reread replaces the cached slice of driver named name with the stored
// one (the one to keep: it is the canonical or the first) and asks for a
// retry.
func (p *slicePublisher) reread(ctx context.Context, driver, name string) error {
	s, err := p.m.opts.Client.NodeResourceSlices().Get(ctx, name)
	ss := slices.DeleteFunc(slices.Clone(p.have[driver]), func(c *resourcev1alpha2.NodeResourceSlice) bool { return c.Name == name })
	switch {
	case apierrors.IsNotFound(err):
		p.have[driver] = ss
	case err != nil:
		return fmt.Errorf("read slice %s: %w", name, err)
	case s.Spec.NodeName != p.m.opts.NodeName || s.Spec.DriverName != driver:
		return fmt.Errorf("slice %s belongs to node %q driver %q", name, s.Spec.NodeName, s.Spec.DriverName)
	default:
		p.have[driver] = append([]*resourcev1alpha2.NodeResourceSlice{s}, ss...)
	}
	return errStale
}

// deleteFrom deletes driver's cached slices from index keep on.
func (p *slicePublisher) deleteFrom(ctx context.Context, driver string, keep int) error {
	ss := p.have[driver]
	if len(ss) <= keep {
		return nil
	}
	for len(ss) > keep {
		s := ss[len(ss)-1]
		actx, cancel := p.m.apiContext(ctx)
		err := p.m.opts.Client.NodeResourceSlices().Delete(actx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			p.have[driver] = ss
			return fmt.Errorf("delete slice %s: %w", s.Name, err)
		}
		p.m.metrics.sliceWrites.WithLabelValues("delete").Inc()
		p.m.log.Info("DRA manager: slice deleted", "slice", s.Name, "driver", driver)
		ss = ss[:len(ss)-1]
	}
	p.have[driver] = ss
	if len(ss) == 0 {
		delete(p.have, driver)
	}
	return nil
}

// nodeOwner is the owner reference of a slice to its Node: the slices go
// when the Node does.
func nodeOwner(name string, uid types.UID) metav1.OwnerReference {
	yes, no := true, false
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid, Controller: &yes, BlockOwnerDeletion: &no}
}
