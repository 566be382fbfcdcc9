// Package dra is the DynamicResources plugin's scheduler extension: what
// the scheduler process does for DRA around the plugin's decisions. It
// keeps the plugin's snapshot extension (dynamicresources.Objects) current
// from the DRA informers, gates pending pods whose template claims are not
// there yet, writes the PodSchedulingContexts and deallocation requests of
// claims a driver's controller allocates, and gives pods placed by hand
// the claim cycle's hooks. For devices with binding conditions it splits
// the binding in two (bindingconditions.go): it waits on the claim
// informer for the conditions and releases the claims when that fails.
// The scheduler's core reaches it only through the framework's extension
// interfaces, from the registry (internal/scheduler/extensions).
package dra

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/client"
	resourcev1 "k8s.io/api/resource/v1"
)

// Config is what the extension needs from the scheduler.
type Config struct {
	// Client writes PodSchedulingContexts and deallocation requests; nil
	// fails those writes (unit tests without an API server).
	Client *client.Client
	// APITimeout bounds each write.
	APITimeout time.Duration
	Log        *slog.Logger
	// Queue is the scheduler's queue, for Regate and the events of
	// released reservations.
	Queue framework.QueueHandle
}

// Extension is the DynamicResources plugin's scheduler extension. Without
// informers (Inform or UseListers) it adds no snapshot extension, and
// every claim reads as absent, as a scheduler without DRA informers did.
type Extension struct {
	plugin     *dynamicresources.DynamicResources
	client     *client.Client
	apiTimeout time.Duration
	log        *slog.Logger
	queue      framework.QueueHandle
	src        *source // nil without informers
}

var (
	_ framework.SnapshotExtender     = (*Extension)(nil)
	_ framework.PreEnqueueExtension  = (*Extension)(nil)
	_ framework.EventExtension       = (*Extension)(nil)
	_ framework.HoldExtension        = (*Extension)(nil)
	_ framework.RejectionExtension   = (*Extension)(nil)
	_ framework.BindExtension        = (*Extension)(nil)
	_ framework.AssignedPodExtension = (*Extension)(nil)
)

// New returns the extension of plugin p, the instance the scheduler's
// frameworks run.
func New(p *dynamicresources.DynamicResources, c Config) *Extension {
	return &Extension{plugin: p, client: c.Client, apiTimeout: c.APITimeout, log: c.Log, queue: c.Queue}
}

// Name is the plugin's.
func (e *Extension) Name() string { return dynamicresources.Name }

// Inform subscribes the extension to the DRA informers of f; call it once,
// before f starts.
func (e *Extension) Inform(f *client.Factory) error {
	src, err := newSource(f)
	if err != nil {
		return err
	}
	e.src = src
	return nil
}

// Listers are the DRA listers the extension reads, for UseListers.
type Listers struct {
	Claims          client.Lister[*resourcev1alpha2.ResourceClaim]
	Slices          client.Lister[*resourcev1alpha2.NodeResourceSlice]
	Classes         client.Lister[*resourcev1alpha2.ResourceClass]
	ClassParameters client.Lister[*resourcev1alpha2.ResourceClassParameters]
	ClaimParameters client.Lister[*resourcev1alpha2.ResourceClaimParameters]
	Contexts        client.Lister[*resourcev1alpha2.PodSchedulingContext]
}

// V1Listers are the resource.k8s.io/v1 listers the extension reads, and
// the namespaces (whose label allows admin access to devices).
type V1Listers struct {
	Claims     client.Lister[*resourcev1.ResourceClaim]
	Slices     client.Lister[*resourcev1.ResourceSlice]
	Classes    client.Lister[*resourcev1.DeviceClass]
	Namespaces client.Lister[*corev1.Namespace]
	// TaintRules are the DeviceTaintRules; nil lists none.
	TaintRules *client.Lister[*resourcev1.DeviceTaintRule]
}

// ClaimIndexers must be on the indexer behind Listers.Claims.
var ClaimIndexers = toolscache.Indexers{generatedIndex: generatedKeys}

// UseListers makes the extension read l, whose stores tests change
// themselves; it learns of changes only through BeforeEvent.
func (e *Extension) UseListers(l Listers) {
	e.src = &source{
		Listers: l,
		written: map[string]*resourcev1alpha2.PodSchedulingContext{}, dirty: true,
	}
}

// Extend adds the current DRA objects to snap.
func (e *Extension) Extend(snap *framework.Snapshot) (*framework.Snapshot, error) {
	if e.src == nil {
		return snap, nil
	}
	objs, err := e.src.objects()
	if err != nil {
		return nil, err
	}
	return snap.WithExtension(dynamicresources.Name, objs), nil
}

// PreEnqueue keeps a pending pod out of the active queue while the claim
// of a template entry is neither recorded in its status nor in the claim
// informer: the claim's event (Regate, in AfterEvent) or the status update
// that records it lets the pod in, whichever comes first. No attempt,
// condition or event is spent on it meanwhile. Pods given a node by hand
// pass: their claim cycle records the wait in their
// ResourceClaimsAllocated condition.
func (e *Extension) PreEnqueue(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return true
	}
	var generated func(types.UID, string) bool
	if e.src != nil {
		generated = e.src.generatedForAny
	}
	return dynamicresources.ClaimsNamed(pod, generated)
}

// BeforeEvent marks the DRA objects stale: a pod the event moves must see
// it. A claim's event marks only that claim.
func (e *Extension) BeforeEvent(ev framework.ClusterEvent, obj any) {
	if e.src == nil {
		return
	}
	switch ev.Resource {
	case framework.ResourceClaim:
		e.src.touch(obj)
	case framework.ResourceClaimV1:
		e.src.touchV1(obj)
	default:
		e.src.touch(nil)
	}
}

// AfterEvent regates the pod a new claim was generated for: it may be
// gated waiting for it.
func (e *Extension) AfterEvent(ev framework.ClusterEvent, obj any) {
	if ev.ActionType != framework.Add {
		return
	}
	if c, ok := obj.(*resourcev1alpha2.ResourceClaim); ok {
		if uid, _, ok := resourcev1alpha2.GeneratedFor(c); ok {
			e.queue.Regate(uid)
		}
	}
	if c, ok := obj.(*resourcev1.ResourceClaim); ok {
		if k := dynamicresources.V1GeneratedKey(c); k != "" {
			uid, _, _ := strings.Cut(k, "/")
			e.queue.Regate(types.UID(uid))
		}
	}
}

// Hold parks a pod whose control-plane claims wait for their drivers: it
// asks them through the pod's PodSchedulingContext, and the pod waits
// until they answer or allocate.
func (e *Extension) Hold(state *framework.CycleState, pod *corev1.Pod, d *framework.Diagnosis) (*framework.Status, framework.Write) {
	n := dynamicresources.Negotiate(state, d)
	if n == nil {
		return nil, nil
	}
	return n.Status, func(ctx context.Context) error { return e.writeContext(ctx, pod, n) }
}

// Rejected requests the deallocation of the claim PostFilter chose: the
// claim's own update (deallocationRequested, then the driver's
// deallocation) moves the pod.
func (e *Extension) Rejected(state *framework.CycleState, pod *corev1.Pod) (string, framework.Write) {
	dl := dynamicresources.RequestedDeallocation(state)
	if dl == nil {
		return "", nil
	}
	return fmt.Sprintf(" Requested deallocation of claim %s, allocated where the pod does not fit.", dl),
		func(ctx context.Context) error { return e.requestDeallocation(ctx, pod, dl) }
}

// WaitsQuietly: the pod's claims are recorded in its status but not seen
// yet; their events are on their way.
func (e *Extension) WaitsQuietly(state *framework.CycleState) bool {
	return dynamicresources.AwaitsRecordedClaims(state)
}

// Bound deletes the pod's scheduling context: the negotiation is over.
func (e *Extension) Bound(ctx context.Context, pod *corev1.Pod) { e.contextDone(ctx, pod) }

// BindFailed tells the queue that the devices the pod's failed binding
// had reserved in memory are free again: no API event says so, and pods
// parked because of that reservation wait for claim events that free
// devices. Each claim the pod named is reported as freed.
func (e *Extension) BindFailed(pod *corev1.Pod) {
	if e.src == nil || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	for _, name := range pod.ResourceClaimNames() {
		cur, err := e.src.Claims.Get(pod.Namespace, name)
		if err != nil {
			continue
		}
		old := cur.DeepCopy()
		if old.Status.Allocation == nil {
			old.Status.Allocation = &resourcev1alpha2.AllocationResult{}
		}
		e.queue.OnEvent(framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Update}, old, cur)
	}
}

// Concerns: the pod uses claims.
func (e *Extension) Concerns(pod *corev1.Pod) bool { return len(pod.Spec.ResourceClaims) > 0 }

// NeedsCycle: some claim the pod uses is not allocated and reserved for
// it, or its ResourceClaimsAllocated condition still says False.
func (e *Extension) NeedsCycle(pod *corev1.Pod) bool {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodResourceClaimsAllocated {
			if c.Status == corev1.ConditionFalse {
				return true
			}
			break
		}
	}
	return !e.plugin.ClaimsReady(pod, e.claim)
}

// Ready: the snapshot's claims are already allocated and reserved for the
// pod.
func (e *Extension) Ready(pod *corev1.Pod, snap *framework.Snapshot) bool {
	objs, ok := snap.Extension(dynamicresources.Name).(*dynamicresources.Objects)
	return ok && objs != nil && e.plugin.ClaimsReady(pod, objs.ClaimAnyVersion)
}

// HoldAssigned: the claim controller asks the drivers through a
// PodSchedulingContext with only selectedNode; the scheduler waits for
// their allocation and then reserves the rest.
func (e *Extension) HoldAssigned(state *framework.CycleState, _ *corev1.Pod, d *framework.Diagnosis) *framework.Status {
	n := dynamicresources.Negotiate(state, d)
	if n == nil {
		return nil
	}
	return framework.NewStatus(framework.Wait, dynamicresources.ReasonWaitingForAllocation).
		WithDetail("%s", n.Status.Detail()).WithPlugin(dynamicresources.Name)
}

// BoundMessage names the claims the binding allocated and reserved.
func (e *Extension) BoundMessage(state *framework.CycleState, node string) string {
	var names []string
	for _, c := range dynamicresources.BoundClaims(state) {
		names = append(names, c.Name)
	}
	return fmt.Sprintf("Allocated and reserved resource claims %s on %s", strings.Join(names, ", "), node)
}

// claim reads a claim from the informer's cache; false when it is not
// there (or there are no informers).
func (e *Extension) claim(ns, name string) (*resourcev1alpha2.ResourceClaim, bool) {
	if e.src == nil {
		return nil, false
	}
	if e.src.V1 != nil {
		if c, err := e.src.V1.Claims.Get(ns, name); err == nil {
			return resourceconv.ClaimToV1alpha2(c), true // its allocation and reservations
		}
	}
	c, err := e.src.Claims.Get(ns, name)
	return c, err == nil
}
