package scheduler

import (
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/client"
)

// addHandlers subscribes the cache and the queue to nodes and pods, and
// the queue to every other kind a plugin registered events for.
func (s *Scheduler) addHandlers(f *client.Factory) error {
	handlers := []struct {
		inf toolscache.SharedIndexInformer
		h   toolscache.ResourceEventHandler
	}{
		{f.Nodes().SharedIndexInformer, client.SplitReplacements(toolscache.ResourceEventHandlerFuncs{
			AddFunc: s.onNodeAdd, UpdateFunc: s.onNodeUpdate, DeleteFunc: s.onNodeDelete,
		})},
		{f.Pods().SharedIndexInformer, s.podHandler()},
	}
	for _, res := range s.fw.EventResources() {
		inf := extraInformer(f, res)
		if inf == nil {
			continue // Node and AssignedPod are above; WildCard needs nothing more
		}
		handlers = append(handlers, struct {
			inf toolscache.SharedIndexInformer
			h   toolscache.ResourceEventHandler
		}{inf, s.forward(res)})
	}
	for _, x := range handlers {
		if _, err := x.inf.AddEventHandler(x.h); err != nil {
			return fmt.Errorf("register event handler: %w", err)
		}
	}
	return nil
}

// podHandler turns pod events into cache and queue changes. A relist that
// finds a pod's name taken by a new pod is the old pod's deletion and the
// new one's addition (client.SplitReplacements): otherwise the old pod's
// resources stay on its node and the new pod leaves the queue.
func (s *Scheduler) podHandler() toolscache.ResourceEventHandler {
	return client.SplitReplacements(toolscache.ResourceEventHandlerFuncs{
		AddFunc: s.onPodAdd, UpdateFunc: s.onPodUpdate, DeleteFunc: s.onPodDelete,
	})
}

// extraInformer is the informer of a kind that only plugins care about.
func extraInformer(f *client.Factory, res framework.EventResource) toolscache.SharedIndexInformer {
	switch res {
	case framework.ResourceClaim:
		return f.ResourceClaims().SharedIndexInformer
	case framework.ResourceClass:
		return f.ResourceClasses().SharedIndexInformer
	case framework.NodeResourceSlice:
		return f.NodeResourceSlices().SharedIndexInformer
	case framework.PodSchedulingContext:
		return f.PodSchedulingContexts().SharedIndexInformer
	case framework.ResourceClaimParams:
		return f.ResourceClaimParameters().SharedIndexInformer
	case framework.ResourceClassParams:
		return f.ResourceClassParameters().SharedIndexInformer
	case framework.ResourceClaimV1:
		return f.ResourceClaimsV1().SharedIndexInformer
	case framework.DeviceClass:
		return f.DeviceClasses().SharedIndexInformer
	case framework.ResourceSlice:
		return f.ResourceSlices().SharedIndexInformer
	case framework.DeviceTaintRule:
		return f.DeviceTaintRules().SharedIndexInformer
	}
	return nil
}

// forward turns an informer's events into cluster events for the queue.
// The EventExtensions see each event first (BeforeEvent: the DRA objects
// are marked stale), since handlers of different listeners run in no
// fixed order and a pod moved by this event must see it; then the queue
// moves pods; then AfterEvent (DRA: a generated claim regates its pod).
// TestExtensionsSeeEventsBeforeTheQueue pins the order.
func (s *Scheduler) forward(res framework.EventResource) toolscache.ResourceEventHandler {
	event := func(action framework.ActionType, oldObj, newObj, obj any) {
		ev := framework.ClusterEvent{Resource: res, ActionType: action}
		for _, e := range s.exts.events {
			e.BeforeEvent(ev, obj)
		}
		s.queue.OnEvent(ev, oldObj, newObj)
		for _, e := range s.exts.events {
			e.AfterEvent(ev, obj)
		}
	}
	return client.SplitReplacements(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { event(framework.Add, nil, obj, obj) },
		UpdateFunc: func(oldObj, newObj any) { event(framework.Update, oldObj, newObj, newObj) },
		DeleteFunc: func(obj any) {
			obj = untomb(obj)
			event(framework.Delete, obj, nil, obj)
		},
	})
}

func untomb(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (s *Scheduler) onNodeAdd(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.cache.AddNode(n)
	s.queue.OnEvent(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, n)
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	s.cache.UpdateNode(n)
	s.queue.OnEvent(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Update}, o, n)
}

func (s *Scheduler) onNodeDelete(obj any) {
	n, ok := untomb(obj).(*corev1.Node)
	if !ok {
		return
	}
	s.cache.RemoveNode(n.Name)
	s.queue.OnEvent(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Delete}, n, nil)
}

// holdsResources: bound and not terminated.
func holdsResources(p *corev1.Pod) bool { return p.Spec.NodeName != "" && !framework.IsTerminal(p) }

func (s *Scheduler) onPodAdd(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case holdsResources(p):
		s.cache.AddPod(p)
		s.queue.OnEvent(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add}, nil, p)
		if s.needsClaimCycle(p) {
			s.queue.Add(p)
		}
	case s.responsible(p):
		s.queue.Add(p)
	}
}

func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	switch {
	case holdsResources(o) && !holdsResources(n): // terminated
		s.queue.Delete(n)
		s.cache.RemovePod(o)
		s.queue.OnEvent(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, o, nil)
	case holdsResources(n):
		// Just bound (by us or by someone else), or a bound pod changed.
		// It needs a claim cycle only if its claims are not ready; a pod
		// whose binding we are committing is in flight (its claims count
		// as ready only after PostBind), so the queue merely records the
		// update and drops the pod when that binding succeeds.
		if s.needsClaimCycle(n) {
			s.queue.Update(o, n)
		} else {
			s.queue.Delete(n)
		}
		s.cache.UpdatePod(n)
		s.queue.OnEvent(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Update}, o, n)
	case s.responsible(n):
		// An assumed pod is in flight: the queue only records the update.
		s.queue.Update(o, n)
	case n.Spec.NodeName == "":
		s.queue.Delete(n) // being deleted, terminated, or another scheduler's
	}
}

func (s *Scheduler) onPodDelete(obj any) {
	p, ok := untomb(obj).(*corev1.Pod)
	if !ok {
		return
	}
	s.queue.Delete(p)
	assumed := s.cache.IsAssumed(p.UID)
	s.cache.RemovePod(p) // a bound pod, or an assumed one deleted before its binding showed
	if p.Spec.NodeName != "" || assumed {
		s.queue.OnEvent(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, p, nil)
	}
}
