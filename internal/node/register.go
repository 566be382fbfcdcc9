package node

import (
	"context"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
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
	want := a.desiredNode(nil, time.Now())
	actx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
	defer cancel()
	out, err := nodes.Create(actx, want)
	if err == nil {
		a.node.last = out
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
	want = a.desiredNode(cur, time.Now())
	if out, err = nodes.Update(actx, want); err != nil {
		return fmt.Errorf("update node %s: %w", a.cfg.NodeName, err)
	}
	want = a.desiredNode(out, time.Now())
	if out, err = nodes.UpdateStatus(actx, want); err != nil {
		return fmt.Errorf("update status of node %s: %w", a.cfg.NodeName, err)
	}
	a.node.last = out
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

// heartbeat renews the Node's status from the last written Node, reading
// the Node again only after a conflict, and registering again if the Node
// was deleted.
func (a *Agent) heartbeat(ctx context.Context) error {
	nodes := a.cfg.Client.Nodes()
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
		out, err := nodes.UpdateStatus(actx, a.desiredNode(a.node.last, time.Now()))
		if err == nil {
			cancel()
			a.node.last = out
			return nil
		}
		switch {
		case apierrors.IsNotFound(err):
			cancel()
			return a.register(ctx)
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
	}
}

// heartbeatLoop heartbeats every interval, and at once when asked.
func (a *Agent) heartbeatLoop(ctx context.Context, first time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.beatNow:
		}
		if err := a.heartbeat(ctx); err != nil {
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
		t.Stop()
		t.Reset(a.cfg.HeartbeatInterval)
	}
}
