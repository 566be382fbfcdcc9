package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/pkg/client"
)

// Node labels the agent sets.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelOS       = "kubernetes.io/os"
	LabelArch     = "kubernetes.io/arch"
	// LabelCDI is "true" when the runtime injects CDI devices.
	LabelCDI = "allot.dev/cdi"
)

// Ready condition reason and message of a heartbeating agent.
const (
	ReasonNodeReady  = "KubeletReady"
	messageNodeReady = "allot node agent is posting ready status"
)

// nodeState is the Node as the agent last wrote it; only the goroutine
// that registers and heartbeats touches it.
type nodeState struct {
	last     *corev1.Node
	addrs    []corev1.NodeAddress
	port     int32
	rtString string
	// lease is the heartbeat Lease as last written (nil: read it again).
	lease *coordinationv1.Lease
	// statusAt is when the Node's status was last written; failed says
	// the last heartbeat failed (the node may have been marked NotReady
	// meanwhile, so the next one writes the status).
	statusAt time.Time
	failed   bool
}

// desiredNode is the Node the agent publishes: labels and status, over
// cur (nil when registering) whose other fields are kept.
func (a *Agent) desiredNode(cur *corev1.Node, now time.Time) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName}}
	if cur != nil {
		n = cur.DeepCopy()
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range a.cfg.Labels {
		n.Labels[k] = v
	}
	n.Labels[LabelHostname] = a.cfg.NodeName
	n.Labels[LabelOS] = goruntime.GOOS
	n.Labels[LabelArch] = goruntime.GOARCH
	n.Labels[LabelCDI] = strconv.FormatBool(a.cfg.Runtime.SupportsCDI())
	if a.cfg.SelfFenceAfter > 0 {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[fence.AnnotationSelfFenceAfter] = a.cfg.SelfFenceAfter.String()
	} else {
		delete(n.Annotations, fence.AnnotationSelfFenceAfter)
	}

	h := host()
	capacity := a.cfg.capacity()
	n.Status.Capacity = capacity
	n.Status.Allocatable = corev1.ResourceList{}
	for k, v := range capacity {
		n.Status.Allocatable[k] = v.DeepCopy()
	}
	n.Status.Addresses = a.node.addrs
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = a.node.port
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID: h.machineID, SystemUUID: h.machineID, BootID: h.bootID, KernelVersion: h.kernel,
		OSImage: h.osImage, ContainerRuntimeVersion: a.node.rtString, KubeletVersion: h.agentVersion,
		OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
	}
	n.Status.Conditions = readyCondition(n.Status.Conditions, now)
	for _, d := range a.cfg.NodeDecorators {
		d.DecorateNode(n)
	}
	return n
}

// readyCondition renews the Ready condition in conds, keeping the others.
func readyCondition(conds []corev1.NodeCondition, now time.Time) []corev1.NodeCondition {
	ts := metav1.NewTime(now.Truncate(time.Second))
	ready := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonNodeReady, Message: messageNodeReady,
		LastHeartbeatTime: ts, LastTransitionTime: ts,
	}
	out := make([]corev1.NodeCondition, 0, len(conds)+1)
	found := false
	for _, c := range conds {
		if c.Type != corev1.NodeReady {
			out = append(out, c)
			continue
		}
		if c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			ready.LastTransitionTime = c.LastTransitionTime
		}
		out = append(out, ready)
		found = true
	}
	if !found {
		out = append(out, ready)
	}
	return out
}

// register creates the Node, or takes over an existing one: its labels
// are merged and its status replaced.
func (a *Agent) register(ctx context.Context) error {
	nodes := a.cfg.Client.Nodes()
	// The Ready condition's heartbeat is now to the second: the fence
	// counts from it, as the claim controller does.
	now := time.Now()
	want := a.desiredNode(nil, now)
	actx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
	defer cancel()
	out, err := nodes.Create(actx, want)
	if err == nil {
		a.node.last, a.node.statusAt = out, time.Now()
		a.fence.renewed(now.Truncate(time.Second))
		a.cfg.Logger.Info("registered node", "node", a.cfg.NodeName)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", a.cfg.NodeName, err)
	}
	cur, err := nodes.Get(actx, a.cfg.NodeName)
	if err != nil {
		return fmt.Errorf("get node %s: %w", a.cfg.NodeName, err)
	}
	want = a.desiredNode(cur, now)
	if out, err = nodes.Update(actx, want); err != nil {
		return fmt.Errorf("update node %s: %w", a.cfg.NodeName, err)
	}
	want = a.desiredNode(out, now)
	if out, err = nodes.UpdateStatus(actx, want); err != nil {
		return fmt.Errorf("update status of node %s: %w", a.cfg.NodeName, err)
	}
	a.node.last, a.node.statusAt = out, time.Now()
	a.fence.renewed(now.Truncate(time.Second))
	a.cfg.Logger.Info("took over existing node", "node", a.cfg.NodeName)
	return nil
}

// registerUntilDone registers, retrying with back-off until it succeeds
// or ctx ends (the API server may start after the agent).
func (a *Agent) registerUntilDone(ctx context.Context) error {
	delay := 500 * time.Millisecond
	for {
		err := a.register(ctx)
		if err == nil {
			return nil
		}
		a.cfg.Logger.Warn("register node", "err", err, "retry", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("register node %s: %w", a.cfg.NodeName, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// heartbeat renews the node's Lease and, when its status changed, when
// asked to (force), after a failed heartbeat, or when the last write is
// NodeStatusReportFrequency old, the Node's status, as the kubelet does:
// a Lease renewal is a small write that no informer of Nodes sees.
func (a *Agent) heartbeat(ctx context.Context, force bool) error {
	now := time.Now()
	created, leaseErr := a.renewLease(ctx, now)
	if leaseErr == nil {
		a.fence.renewed(now)
	}
	desired := a.desiredNode(a.node.last, now)
	// A Lease that had to be created again may have gone with its Node
	// (deleted, the Lease collected as its dependent): the status write
	// finds out, and registers the Node again if so.
	due := force || created || a.node.failed || leaseErr != nil || a.node.last == nil ||
		now.Sub(a.node.statusAt) >= a.cfg.NodeStatusReportFrequency || statusChanged(desired, a.node.last)
	var statusErr error
	if due {
		statusErr = a.writeStatus(ctx, desired)
	}
	err := errors.Join(leaseErr, statusErr)
	a.node.failed = err != nil
	return err
}

// statusChanged reports whether desired differs from last in more than
// the Ready condition's heartbeat time.
func statusChanged(desired, last *corev1.Node) bool {
	if last == nil {
		return true
	}
	d := desired.DeepCopy()
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type != corev1.NodeReady {
			continue
		}
		for _, c := range last.Status.Conditions {
			if c.Type == corev1.NodeReady {
				d.Status.Conditions[i].LastHeartbeatTime = c.LastHeartbeatTime
			}
		}
	}
	return !equality.Semantic.DeepEqual(d.Status, last.Status) || !equality.Semantic.DeepEqual(d.Labels, last.Labels)
}

// writeStatus writes the Node's status from the last written Node,
// reading the Node again only after a conflict, and registering again if
// the Node was deleted.
func (a *Agent) writeStatus(ctx context.Context, desired *corev1.Node) error {
	nodes := a.cfg.Client.Nodes()
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
		out, err := nodes.UpdateStatus(actx, desired)
		if err == nil {
			cancel()
			a.node.last, a.node.statusAt = out, time.Now()
			return nil
		}
		switch {
		case apierrors.IsNotFound(err):
			cancel()
			if err := a.register(ctx); err != nil {
				return err
			}
			a.node.statusAt = time.Now()
			return nil
		case !apierrors.IsConflict(err) || attempt > 0:
			cancel()
			return fmt.Errorf("update status of node %s: %w", a.cfg.NodeName, err)
		}
		cur, gerr := nodes.Get(actx, a.cfg.NodeName)
		cancel()
		if gerr != nil {
			return fmt.Errorf("get node %s: %w", a.cfg.NodeName, gerr)
		}
		a.node.last = cur
		desired = a.desiredNode(cur, time.Now())
	}
}

// renewLease renews the node's heartbeat Lease, kube-node-lease/NAME,
// creating it (owned by the Node, so it goes with it) when missing. It
// updates the Lease as last written and reads it again only after a
// conflict or when it is gone.
// created says the Lease was missing and had to be created.
func (a *Agent) renewLease(ctx context.Context, now time.Time) (created bool, err error) {
	leases := a.cfg.Client.Leases(corev1.NamespaceNodeLease)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
		l, err := a.leaseToRenew(actx, leases)
		if err == nil {
			renew := metav1.NewMicroTime(now)
			l.Spec.RenewTime = &renew
			if l.CreationTimestamp.IsZero() {
				created = true
				l, err = leases.Create(actx, l)
			} else {
				l, err = leases.Update(actx, l)
			}
		}
		cancel()
		if err == nil {
			a.node.lease = l
			return created, nil
		}
		a.node.lease = nil
		if attempt > 0 || !(apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)) {
			return false, fmt.Errorf("renew lease %s/%s: %w", corev1.NamespaceNodeLease, a.cfg.NodeName, err)
		}
	}
}

// leaseToRenew is the Lease to write: the last written one, the stored
// one, or a new one (no creationTimestamp), with this node's holder,
// duration and owner.
func (a *Agent) leaseToRenew(ctx context.Context, leases *client.LeaseClient) (*coordinationv1.Lease, error) {
	l := a.node.lease.DeepCopy()
	if l == nil {
		var err error
		l, err = leases.Get(ctx, a.cfg.NodeName)
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Namespace: corev1.NamespaceNodeLease}}
		case err != nil:
			return nil, err
		}
	}
	holder, secs := a.cfg.NodeName, int32(max(1, a.cfg.NodeLeaseDuration/time.Second))
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, &secs
	if n := a.node.last; n != nil && n.UID != "" && !slices.ContainsFunc(l.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == n.UID }) {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	return l, nil
}

// heartbeatLoop heartbeats every interval, and at once when asked.
func (a *Agent) heartbeatLoop(ctx context.Context, first time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		force := false
		select {
		case <-t.C:
		case <-a.beatNow:
			force = true
		case <-ctx.Done():
			return
		}
		if err := a.heartbeat(ctx, force); err != nil {
			a.gate.arm() // the node may be evicted before it is back
			a.cfg.Metrics.Heartbeats.WithLabelValues("error").Inc()
			level := slog.LevelWarn
			if client.IsInsufficientStorage(err) {
				// The API server's storage is full: the client logged that
				// once (client.LogWriteOutages); a line every interval
				// would say nothing new.
				level = slog.LevelDebug
			}
			a.cfg.Logger.Log(ctx, level, "heartbeat", "err", err)
		} else {
			a.cfg.Metrics.Heartbeats.WithLabelValues("ok").Inc()
		}
		next := a.cfg.HeartbeatInterval
		if a.node.failed && a.fence != nil {
			// Retry sooner: a few failed renewals must not raise the fence.
			next = min(next, a.fence.after/4)
		}
		t.Stop()
		t.Reset(next)
	}
}
