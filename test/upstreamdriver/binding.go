package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// bindingSatisfier is the example driver's BindingConditions controller,
// run in the driver's process: delay after it first sees a claim
// allocated devices of this driver in this node's pool that have binding
// conditions, it sets those conditions True in the claim's
// status.devices, or, with fail, the devices' binding failure conditions
// (as a device that could not be attached). A claim it has answered is
// not answered again.
type bindingSatisfier struct {
	client kubernetes.Interface
	driver string
	node   string
	delay  time.Duration
	fail   bool
	log    *slog.Logger

	mu   sync.Mutex
	done map[types.UID]bool
}

// run watches claims until ctx ends.
func (b *bindingSatisfier) run(ctx context.Context) {
	b.done = map[types.UID]bool{}
	factory := informers.NewSharedInformerFactory(b.client, 0)
	inf := factory.Resource().V1().ResourceClaims().Informer()
	seen := func(obj any) {
		if c, ok := obj.(*resourceapi.ResourceClaim); ok {
			b.consider(ctx, c)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// pending lists the results of claim that wait for a binding condition
// this driver answers.
func (b *bindingSatisfier) pending(c *resourceapi.ResourceClaim) []resourceapi.DeviceRequestAllocationResult {
	if c.Status.Allocation == nil || c.DeletionTimestamp != nil {
		return nil
	}
	var out []resourceapi.DeviceRequestAllocationResult
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == b.driver && r.Pool == b.node && len(r.BindingConditions) > 0 {
			out = append(out, r)
		}
	}
	return out
}

func (b *bindingSatisfier) consider(ctx context.Context, c *resourceapi.ResourceClaim) {
	if len(b.pending(c)) == 0 {
		return
	}
	b.mu.Lock()
	if b.done[c.UID] {
		b.mu.Unlock()
		return
	}
	b.done[c.UID] = true
	b.mu.Unlock()
	ns, name, uid := c.Namespace, c.Name, c.UID
	time.AfterFunc(b.delay, func() {
		if ctx.Err() != nil {
			return
		}
		if err := b.answer(ctx, ns, name, uid); err != nil {
			b.log.Error("binding conditions", "claim", ns+"/"+name, "err", err)
			return
		}
	})
}

// answer writes the conditions into the claim's status, retrying on
// conflicts; a claim gone or replaced is left alone.
func (b *bindingSatisfier) answer(ctx context.Context, ns, name string, uid types.UID) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := b.client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		results := b.pending(c)
		if c.UID != uid || len(results) == 0 {
			return nil
		}
		now := metav1.Now()
		for _, r := range results {
			conds := r.BindingConditions
			if b.fail {
				conds = r.BindingFailureConditions
			}
			st := deviceStatus(c, r)
			for _, t := range conds {
				setCondition(st, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Ready", Message: "set by " + b.driver + " on " + b.node, LastTransitionTime: now})
			}
		}
		_, err = b.client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if err == nil {
			b.log.Info("binding conditions set", "claim", ns+"/"+name, "devices", len(results), "failure", b.fail)
		}
		return err
	})
}

// deviceStatus is the claim's status.devices entry of r, added if missing.
func deviceStatus(c *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocatedDeviceStatus {
	for i := range c.Status.Devices {
		d := &c.Status.Devices[i]
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device && sameShare(d.ShareID, r.ShareID) {
			return d
		}
	}
	d := resourceapi.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
	if r.ShareID != nil {
		s := string(*r.ShareID)
		d.ShareID = &s
	}
	c.Status.Devices = append(c.Status.Devices, d)
	return &c.Status.Devices[len(c.Status.Devices)-1]
}

func sameShare(a *string, b *types.UID) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == string(*b)
}

// setCondition sets cond in d's conditions, replacing one of its type.
func setCondition(d *resourceapi.AllocatedDeviceStatus, cond metav1.Condition) {
	for i := range d.Conditions {
		if d.Conditions[i].Type == cond.Type {
			d.Conditions[i] = cond
			return
		}
	}
	d.Conditions = append(d.Conditions, cond)
}
