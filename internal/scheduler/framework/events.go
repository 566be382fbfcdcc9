package framework

import (
	"fmt"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
)

// EventResource names the kind of object a cluster event is about.
type EventResource string

// Event resources the scheduler delivers. AssignedPod is a pod bound to a
// node (it holds resources there); the DRA kinds are delivered once a
// plugin registers them.
const (
	Node                 EventResource = "Node"
	AssignedPod          EventResource = "AssignedPod"
	ResourceClaim        EventResource = "ResourceClaim"
	ResourceClass        EventResource = "ResourceClass"
	NodeResourceSlice    EventResource = "NodeResourceSlice"
	PodSchedulingContext EventResource = "PodSchedulingContext"
	ResourceClaimParams  EventResource = "ResourceClaimParameters"
	ResourceClassParams  EventResource = "ResourceClassParameters"
	// resource.k8s.io/v1 kinds. ResourceClaimV1 events are about claims
	// stored as v1 (the v1alpha2 ResourceClaim events never show them).
	ResourceClaimV1 EventResource = "ResourceClaim.v1"
	DeviceClass     EventResource = "DeviceClass"
	ResourceSlice   EventResource = "ResourceSlice"
	DeviceTaintRule EventResource = "DeviceTaintRule"
	// WildCard matches events about any resource.
	WildCard EventResource = "*"
)

// ActionType is a bit set of what happened to the object.
type ActionType uint

// Actions. An assigned pod that terminates (Succeeded, Failed) is
// delivered as a Delete: it no longer holds resources.
const (
	Add ActionType = 1 << iota
	Update
	Delete
	All = Add | Update | Delete
)

func (a ActionType) String() string {
	var parts []string
	for _, x := range []struct {
		bit  ActionType
		name string
	}{{Add, "Add"}, {Update, "Update"}, {Delete, "Delete"}} {
		if a&x.bit != 0 {
			parts = append(parts, x.name)
		}
	}
	if len(parts) == 0 {
		return "None"
	}
	return strings.Join(parts, "|")
}

// ClusterEvent is a change in the cluster that may make pods schedulable.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
}

func (e ClusterEvent) String() string { return fmt.Sprintf("%s/%s", e.Resource, e.ActionType) }

// Match reports whether the registered event e covers the event ev.
func (e ClusterEvent) Match(ev ClusterEvent) bool {
	return (e.Resource == WildCard || e.Resource == ev.Resource) && e.ActionType&ev.ActionType != 0
}

// QueueingHint is a plugin's verdict on whether an event may make a pod
// that it rejected schedulable.
type QueueingHint int

// Hints.
const (
	// QueueSkip: the event cannot help the pod; leave it parked.
	QueueSkip QueueingHint = iota
	// Queue: retry the pod.
	Queue
)

// QueueingHintFn looks at one event (oldObj is nil for Add, newObj nil for
// Delete) for a pod the plugin rejected. It runs under the queue's lock:
// it must be cheap, pure, and must not modify its arguments.
type QueueingHintFn func(pod *corev1.Pod, oldObj, newObj any) QueueingHint

// ClusterEventWithHint is one registration: the event, and optionally a
// hint that filters it per pod (nil: always Queue).
type ClusterEventWithHint struct {
	Event ClusterEvent
	Hint  QueueingHintFn
}

// EnqueueExtensions is implemented by plugins that can reject pods: it
// lists the cluster events that may make a pod the plugin rejected
// schedulable. A pod parked as unschedulable moves back to the queue only
// on a registered event of a plugin that rejected it (or after the
// safety-net period). A rejecting plugin that registers nothing leaves its
// pods to the safety net.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister() []ClusterEventWithHint
}
