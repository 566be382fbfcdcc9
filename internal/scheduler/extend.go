package scheduler

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/extensions"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/pkg/client"
)

// extensionSet holds the scheduler's extensions (from the registry,
// internal/scheduler/extensions) by the hooks they implement, in
// registration order. The core calls them through the framework's
// interfaces and names no plugin.
type extensionSet struct {
	all        []framework.Plugin
	snapshot   []framework.SnapshotExtender
	preEnqueue []framework.PreEnqueueExtension
	events     []framework.EventExtension
	hold       []framework.HoldExtension
	rejection  []framework.RejectionExtension
	bind       []framework.BindExtension
	preBind    []framework.PreBindExtension
	assigned   []framework.AssignedPodExtension
}

func newExtensionSet(all []framework.Plugin) extensionSet {
	x := extensionSet{all: all}
	for _, e := range all {
		if v, ok := e.(framework.SnapshotExtender); ok {
			x.snapshot = append(x.snapshot, v)
		}
		if v, ok := e.(framework.PreEnqueueExtension); ok {
			x.preEnqueue = append(x.preEnqueue, v)
		}
		if v, ok := e.(framework.EventExtension); ok {
			x.events = append(x.events, v)
		}
		if v, ok := e.(framework.HoldExtension); ok {
			x.hold = append(x.hold, v)
		}
		if v, ok := e.(framework.RejectionExtension); ok {
			x.rejection = append(x.rejection, v)
		}
		if v, ok := e.(framework.BindExtension); ok {
			x.bind = append(x.bind, v)
		}
		if v, ok := e.(framework.PreBindExtension); ok {
			x.preBind = append(x.preBind, v)
		}
		if v, ok := e.(framework.AssignedPodExtension); ok {
			x.assigned = append(x.assigned, v)
		}
	}
	return x
}

// buildExtensions gets the registry's extensions and sets in opts the
// plugin instances they serve.
func (s *Scheduler) buildExtensions(opts *plugins.Options) {
	s.exts = newExtensionSet(extensions.New(opts, extensions.Host{
		Client: s.cfg.Client, APITimeout: s.cfg.APITimeout, Log: s.log, Queue: queueHandle{s},
	}))
}

// inform subscribes the extensions that read informers to f's.
func (s *Scheduler) inform(f *client.Factory) error {
	for _, e := range s.exts.all {
		if i, ok := e.(extensions.Informed); ok {
			if err := i.Inform(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// queueHandle is the scheduler's queue as extensions see it.
type queueHandle struct{ s *Scheduler }

func (q queueHandle) OnEvent(ev framework.ClusterEvent, oldObj, newObj any) {
	q.s.queue.OnEvent(ev, oldObj, newObj)
}

func (q queueHandle) Regate(uid types.UID) { q.s.queue.Regate(uid) }

// snapshot is the cache's snapshot plus the extensions' additions.
func (s *Scheduler) snapshot() (*framework.Snapshot, error) {
	snap := s.cache.Snapshot()
	for _, e := range s.exts.snapshot {
		var err error
		if snap, err = e.Extend(snap); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// preEnqueue is the queue's gate: every PreEnqueue extension must let the
// pod in.
func (s *Scheduler) preEnqueue(pod *corev1.Pod) bool {
	for _, e := range s.exts.preEnqueue {
		if !e.PreEnqueue(pod) {
			return false
		}
	}
	return true
}

// hold asks the HoldExtensions whether a pod the cycle found a node for
// must wait; the first that holds it wins.
func (s *Scheduler) hold(state *framework.CycleState, pod *corev1.Pod, d *framework.Diagnosis) (framework.Plugin, *framework.Status, framework.Write) {
	for _, e := range s.exts.hold {
		if st, w := e.Hold(state, pod, d); st != nil {
			return e, st, w
		}
	}
	return nil, nil, nil
}

// waitsQuietly: some extension says the cycle's Wait is for events on
// their way.
func (s *Scheduler) waitsQuietly(state *framework.CycleState) bool {
	for _, e := range s.exts.rejection {
		if e.WaitsQuietly(state) {
			return true
		}
	}
	return false
}

// bound and bindFailed tell the BindExtensions how a pending pod's binding
// ended.
func (s *Scheduler) bound(ctx context.Context, pod *corev1.Pod) {
	for _, e := range s.exts.bind {
		e.Bound(ctx, pod)
	}
}

func (s *Scheduler) bindFailed(pod *corev1.Pod) {
	for _, e := range s.exts.bind {
		e.BindFailed(pod)
	}
}

// assignedExtension is the extension whose assigned-pod cycle concerns
// the pod, or nil.
func (s *Scheduler) assignedExtension(pod *corev1.Pod) framework.AssignedPodExtension {
	for _, e := range s.exts.assigned {
		if e.Concerns(pod) {
			return e
		}
	}
	return nil
}
