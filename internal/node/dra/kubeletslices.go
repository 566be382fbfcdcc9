package dra

import (
	"context"
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// Slices of kubelet drivers. Such a driver publishes resource.k8s.io/v1
// ResourceSlices of this node itself, owned by the Node (the upstream
// library always sets that owner). The Manager removes them once the
// driver has had no instance registered for the slice grace period, as
// the kubelet wipes them: a driver that is gone must not leave devices to
// be allocated. Unlike the kubelet, which wipes them all when it starts,
// the Manager gives the drivers of the slices it finds at start the grace
// period to register again, so that restarting the agent alone does not
// empty the inventory. Slices not owned by the Node (written by an admin
// or a cluster-wide driver) are never touched.

// ownedByNode reports whether s is owned by the Node named node.
func ownedByNode(s *resourcev1.ResourceSlice, node string) bool {
	return slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.APIVersion == "v1" && o.Kind == "Node" && o.Name == node
	})
}

// listNodeV1Slices lists the v1 ResourceSlices of this node that the Node
// owns, those of driver only unless driver is empty.
func (m *Manager) listNodeV1Slices(ctx context.Context, driver string) ([]resourcev1.ResourceSlice, error) {
	sel := "spec.nodeName=" + m.opts.NodeName
	if driver != "" {
		sel += ",spec.driver=" + driver
	}
	actx, cancel := m.apiContext(ctx)
	defer cancel()
	list, err := m.opts.Client.ResourceSlices().List(actx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list resource.k8s.io/v1 ResourceSlices of node %s: %w", m.opts.NodeName, err)
	}
	out := list.Items[:0]
	for _, s := range list.Items {
		if ownedByNode(&s, m.opts.NodeName) {
			out = append(out, s)
		}
	}
	return out, nil
}

// graceForV1Slices starts the grace period of every driver that has v1
// ResourceSlices of this node, for those that do not register in time.
// A failed list is retried at the next start only: the slices then stay
// until their driver comes and goes again.
func (m *Manager) graceForV1Slices(ctx context.Context) {
	list, err := m.listNodeV1Slices(ctx, "")
	if err != nil {
		m.log.Warn("DRA manager: the ResourceSlices of drivers that do not register again are kept", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, s := range list {
		if d := s.Spec.Driver; !seen[d] {
			seen[d] = true
			m.drivers.startGrace(d, m.opts.SliceGracePeriod, func() { m.expireDriver(d) })
		}
	}
}

// expireDriver removes the slices of a driver whose grace period ended:
// its NodeResourceSlice, and the v1 ResourceSlices it published.
func (m *Manager) expireDriver(driver string) {
	m.slices.remove(driver)
	m.wipeV1Slices(driver)
}

// wipeV1Slices deletes driver's v1 ResourceSlices of this node, each
// with its UID and resourceVersion as preconditions, so that one the
// driver rewrote in the meantime (it came back) stays.
func (m *Manager) wipeV1Slices(driver string) {
	ctx := m.runContext()
	list, err := m.listNodeV1Slices(ctx, driver)
	if err != nil {
		m.log.Warn("DRA manager: remove the ResourceSlices of a driver that went away", "driver", driver, "err", err)
		return
	}
	n := 0
	for _, s := range list {
		uid, rv := s.UID, s.ResourceVersion
		actx, cancel := m.apiContext(ctx)
		err := m.opts.Client.ResourceSlices().Delete(actx, s.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		cancel()
		switch {
		case err == nil:
			n++
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			m.log.Warn("DRA manager: remove a ResourceSlice of a driver that went away", "driver", driver, "slice", s.Name, "err", err)
		}
	}
	if n > 0 {
		m.log.Info("DRA driver's ResourceSlices removed after its grace period", "driver", driver, "slices", n)
	}
}

// Reasons of the Node events of a driver that changed API. A driver
// publishes a node's devices through one API: a NodeResourceSlice (allot's
// node API) or resource.k8s.io/v1 ResourceSlices (the kubelet's), since
// the one device inventory would count them twice; the API server refuses
// the second kind and the allocator skips v1 slices beside a seed slice.
const (
	// ReasonSwitchedAPI (Normal): the driver registered through the other
	// API than its slices of this node; those the node agent owns
	// (its NodeResourceSlice, or v1 slices owned by the Node) are
	// removed.
	ReasonSwitchedAPI = "DRADriverSwitchedAPI"
	// ReasonPublishedTwice (Warning): v1 slices of the driver that the
	// node agent does not own block its NodeResourceSlice.
	ReasonPublishedTwice = "DRADriverPublishedTwice"
)

// switchPublishing removes d's slices of this node of the API it does not
// speak, when the node agent owns them: a driver that changed API (the
// example driver's --publish) leaves slices the new ones would be refused
// beside.
func (m *Manager) switchPublishing(d *driver) {
	ctx := m.runContext()
	actx, cancel := m.apiContext(ctx)
	defer cancel()
	if d.isKubelet() {
		list, err := m.opts.Client.NodeResourceSlices().List(actx, metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + m.opts.NodeName + ",spec.driverName=" + d.name})
		if err != nil || len(list.Items) == 0 {
			return
		}
		m.slices.remove(d.name)
		m.nodeEvent(corev1.EventTypeNormal, ReasonSwitchedAPI,
			"DRA driver %s registered through the kubelet's DRA API (%s): its NodeResourceSlice %s of allot's node API is removed, "+
				"so that the resource.k8s.io/v1 ResourceSlices it publishes are accepted", d.name, d.reg.service, list.Items[0].Name)
		return
	}
	list, err := m.opts.Client.ResourceSlices().List(actx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + m.opts.NodeName + ",spec.driver=" + d.name})
	if err != nil || len(list.Items) == 0 {
		return
	}
	owned, other := 0, ""
	for _, s := range list.Items {
		if ownedByNode(&s, m.opts.NodeName) {
			owned++
		} else if other == "" {
			other = s.Name
		}
	}
	if owned > 0 {
		m.wipeV1Slices(d.name)
		m.nodeEvent(corev1.EventTypeNormal, ReasonSwitchedAPI,
			"DRA driver %s registered through allot's node API: the %d resource.k8s.io/v1 ResourceSlices it published through the "+
				"kubelet's DRA API are removed, so that its NodeResourceSlice is accepted", d.name, owned)
	}
	if other != "" {
		m.nodeEvent(corev1.EventTypeWarning, ReasonPublishedTwice,
			"DRA driver %s registered through allot's node API, but node %s has its resource.k8s.io/v1 ResourceSlice %s, "+
				"not published by a kubelet plugin of this node: its NodeResourceSlice is refused until that slice is deleted",
			d.name, m.opts.NodeName, other)
	}
}
