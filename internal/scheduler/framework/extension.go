package framework

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// Scheduler extensions are a plugin's side in the scheduler process: the
// state it keeps from informers, the API writes its decisions need, and
// the hooks of the scheduler's loop around the framework. They run only in
// the scheduler, never in Diagnose or a simulation. The scheduler's core
// names no plugin: it gets its extensions from the registry
// (internal/scheduler/extensions) and calls them through the interfaces
// below, each optional; an extension implements Plugin for its name.

// Write is an API write an attempt decided on (a PodSchedulingContext, a
// deallocation request). The scheduler makes it on the attempt's own
// goroutine before the pod is requeued; its failure retries the pod with
// backoff.
type Write func(ctx context.Context) error

// SnapshotExtender adds its extension to the snapshot of every scheduler
// cycle (Snapshot.WithExtension), from the state it keeps current.
type SnapshotExtender interface {
	Plugin
	Extend(snap *Snapshot) (*Snapshot, error)
}

// PreEnqueueExtension keeps a pending pod (no node yet) out of the active
// queue while it returns false; the pod is gated until an update of the
// pod or a Regate lets it in.
type PreEnqueueExtension interface {
	Plugin
	PreEnqueue(pod *corev1.Pod) bool
}

// QueueHandle is what an extension may tell the scheduling queue.
type QueueHandle interface {
	// OnEvent moves the parked pods the event may help, as an informer's
	// event would.
	OnEvent(ev ClusterEvent, oldObj, newObj any)
	// Regate checks a gated pod's PreEnqueue again.
	Regate(uid types.UID)
}

// EventExtension sees every event the scheduler forwards to the queue
// for a resource the plugins registered (not nodes or pods). BeforeEvent
// runs before the queue moves pods for the event: state that a moved
// pod's cycle reads must be marked stale there, since informer handlers
// run in no fixed order. AfterEvent runs after the queue moved them. obj
// is the new object (the old one of a deletion).
type EventExtension interface {
	Plugin
	BeforeEvent(ev ClusterEvent, obj any)
	AfterEvent(ev ClusterEvent, obj any)
}

// HoldExtension may hold a pod that a cycle found a node for, before it
// is assumed: a non-nil status (Wait) parks the pod with that status,
// after w, if any, is written (what the pod waits for may need asking).
type HoldExtension interface {
	Plugin
	Hold(state *CycleState, pod *corev1.Pod, d *Diagnosis) (st *Status, w Write)
}

// RejectionExtension follows a cycle that no node passed, after PostFilter:
// a non-nil w is a write PostFilter decided on whose own events will move
// the pod (no backoff retry); note is appended to the failure's message.
// waitsQuietly reports whether the cycle's Wait is for events already on
// their way, so that a first attempt parks the pod without a condition or
// an event.
type RejectionExtension interface {
	Plugin
	Rejected(state *CycleState, pod *corev1.Pod) (note string, w Write)
	WaitsQuietly(state *CycleState) bool
}

// BindExtension learns how a pending pod's binding ended: Bound after the
// POST succeeded, BindFailed after the reservations were undone.
type BindExtension interface {
	Plugin
	Bound(ctx context.Context, pod *corev1.Pod)
	BindFailed(pod *corev1.Pod)
}

// AssignedPodExtension gives a pod that already has a node (given by hand,
// or bound by someone else) a cycle on that node: the scheduler's
// assigned-pod framework runs there with the pod itself taken off the
// snapshot, Reserve, and a binding of the pod to the node it is on carries
// what the plugins reserved. pod is this scheduler's, not deleted or
// terminated.
type AssignedPodExtension interface {
	Plugin
	// Concerns reports whether the pod has anything this extension's cycle
	// handles; a popped pod no extension concerns is dropped.
	Concerns(pod *corev1.Pod) bool
	// NeedsCycle reports whether the pod needs a cycle now.
	NeedsCycle(pod *corev1.Pod) bool
	// Ready reports, over the cycle's snapshot, that the pod needs
	// nothing: the cycle ends without running the framework.
	Ready(pod *corev1.Pod, snap *Snapshot) bool
	// HoldAssigned may hold the pod after a successful cycle, as Hold
	// does, with a Wait status.
	HoldAssigned(state *CycleState, pod *corev1.Pod, d *Diagnosis) *Status
	// BoundMessage is the Normal event's message after the binding, on node.
	BoundMessage(state *CycleState, node string) string
}

// PreBindExtension splits a pending pod's binding in two when the pod
// needs something to happen between its claims' allocation and its
// binding (devices with binding conditions). TwoStep, on the binding
// goroutine after Reserve, returns what the pod waits for ("" binds in one
// step). The scheduler then posts the Binding with ClaimsOnly (the claims
// allocated and reserved under their fences, the pod left pending),
// calls Committed, and PreBind waits, until ctx ends (the scheduler's
// binding-conditions timeout), for the pod to be bindable; nodeGone
// reports whether the pod's node has left the scheduler's cache. Then the
// full Binding (which only reserves) is posted. After a failure past the
// first step the scheduler calls Release, which undoes what that step
// committed (deallocates the claims), before Unreserve.
type PreBindExtension interface {
	Plugin
	TwoStep(state *CycleState, pod *corev1.Pod) string
	Committed(state *CycleState)
	PreBind(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeGone func() bool) *Status
	Release(ctx context.Context, state *CycleState, pod *corev1.Pod)
}
