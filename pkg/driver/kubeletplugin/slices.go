package kubeletplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// Publishing in kubelet mode (APIKubelet). The model becomes
// resource.k8s.io/v1 devices by the projection allot's allocator applies
// to a NodeResourceSlice (allocator.SeedDevices, docs/design/resource-v1.md
// §3), so a device has the same name, attributes and capacities whichever
// way the driver publishes. The SDK writes them itself rather than through
// k8s.io/dynamic-resource-allocation/resourceslice, which would pull
// k8s.io/apiserver into every driver binary (test/layering forbids it in
// shipped packages): one pool named after the node, owned by the Node,
// in slices of at most resourcev1.ResourceSliceMaxDevices devices, written
// by upstream's rules for pool generations.

// v1Devices projects a model onto v1 devices, sorted by name: pool = the
// node, device = allocator.SeedDeviceName(instance ID), the instance's
// effective attributes under the driver's domain, quantities as
// capacities. Unhealthy instances are left out (v1 devices have no
// health). A model with partition groups is refused: the projection does
// not express them as shared counters. So is a model an instance of which
// the projection leaves out (a name that is not a DNS label, too many
// attributes). Attributes v1 cannot hold (lists, long strings) are left
// out of their device; warnings lists them.
func v1Devices(driver, node string, m resourcev1alpha2.NodeResourceModel) (devices []resourcev1.Device, warnings []string, err error) {
	if path := partitionedInstance(m); path != "" {
		return nil, nil, fmt.Errorf("instance %s has partitions, which resource.k8s.io/v1 devices published in kubelet mode (APIKubelet) cannot express: "+
			"publish a model without partition groups, or serve allot's node API (APIAllot), whose NodeResourceSlices keep them", path)
	}
	slice := &resourcev1alpha2.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec:       resourcev1alpha2.NodeResourceSliceSpec{NodeName: node, DriverName: driver, NodeResourceModel: m},
	}
	pools, problems := allocator.SeedDevices([]*resourcev1alpha2.NodeResourceSlice{slice})
	var errs []string
	for _, pr := range problems {
		if pr.Field != "" {
			warnings = append(warnings, pr.String())
		} else {
			errs = append(errs, pr.String())
		}
	}
	if len(errs) > 0 {
		return nil, warnings, fmt.Errorf("the model cannot be published as resource.k8s.io/v1 devices: %s", strings.Join(errs, "; "))
	}
	for _, p := range pools {
		for _, d := range p.Devices {
			devices = append(devices, resourcev1.Device{Name: d.Name, Attributes: d.Attributes, Capacity: d.Capacity})
		}
	}
	slices.SortFunc(devices, func(a, b resourcev1.Device) int { return strings.Compare(a.Name, b.Name) })
	return devices, warnings, nil
}

// partitionedInstance returns the ID of the first instance with
// partition groups, or "".
func partitionedInstance(m resourcev1alpha2.NodeResourceModel) string {
	if m.Partitionable == nil {
		return ""
	}
	for _, in := range m.Partitionable.ResourceInstances {
		if len(in.Partitions) > 0 {
			return in.Name
		}
	}
	return ""
}

// slicePublisher keeps the node's ResourceSlices of the driver equal to
// the desired devices: on every change, when the node agent registers the
// driver, every Options.ResyncPeriod, and after a failure with back-off.
type slicePublisher struct {
	client       KubeClient
	driver, node string
	resync       time.Duration
	log          *slog.Logger

	mu      sync.Mutex
	devices []resourcev1.Device // desired, sorted by name
	set     bool                // devices were set at least once
	wake    chan struct{}       // one pending sync
	done    chan struct{}       // closed when run returns

	// ownerUID is the Node's UID, read once.
	ownerUID types.UID
}

// Back-off of a failed sync: doubling from minRetry, at most the resync
// period.
const minRetry = 500 * time.Millisecond

func newSlicePublisher(opts Options, log *slog.Logger) *slicePublisher {
	return &slicePublisher{client: opts.KubeClient, driver: opts.DriverName, node: opts.NodeName, resync: opts.ResyncPeriod,
		log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// setDevices makes devices the desired state and starts a sync when they
// changed.
func (s *slicePublisher) setDevices(devices []resourcev1.Device) {
	s.mu.Lock()
	changed := !s.set || !apiequality.Semantic.DeepEqual(devices, s.devices)
	s.devices, s.set = devices, true
	s.mu.Unlock()
	if changed {
		s.trigger()
	}
}

// trigger starts a sync soon.
func (s *slicePublisher) trigger() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run syncs until ctx ends.
func (s *slicePublisher) run(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(s.resync)
	defer timer.Stop()
	retry := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
		next := s.resync
		if err := s.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			retry = min(max(2*retry, minRetry), s.resync)
			next = retry
			s.log.Warn("publish ResourceSlices failed; retrying", "node", s.node, "retryIn", retry, "err", err)
		} else {
			retry = 0
		}
		timer.Reset(next)
	}
}

// wait returns once run has returned.
func (s *slicePublisher) wait() { <-s.done }

// apiTimeout bounds one sync's API calls.
const apiTimeout = 30 * time.Second

// sync makes the node's slices of the driver what the devices need:
//
//   - one pool named after the node, ceil(devices/128) slices (none for no
//     devices) owned by the Node, named NODE-DRIVER-<random>;
//   - slices of the newest pool generation are kept and updated in name
//     order; every other slice of the driver on the node (older
//     generations, other pools, surplus ones) is deleted first, with its
//     UID and resourceVersion as preconditions;
//   - as upstream's controller does, the generation is bumped when a slice
//     must be created or more than one updated, so that consumers never
//     combine slices of two states; one update keeps it.
func (s *slicePublisher) sync(ctx context.Context) error {
	s.mu.Lock()
	devices, set := s.devices, s.set
	s.mu.Unlock()
	if !set {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	owner, err := s.owner(ctx)
	if err != nil {
		return err
	}
	api := s.client.ResourceV1().ResourceSlices()
	list, err := api.List(ctx, metav1.ListOptions{FieldSelector: resourcev1.ResourceSliceSelectorDriver + "=" + s.driver + "," +
		resourcev1.ResourceSliceSelectorNodeName + "=" + s.node})
	if err != nil {
		return fmt.Errorf("list ResourceSlices: %w", err)
	}
	var want [][]resourcev1.Device
	for chunk := range slices.Chunk(devices, resourcev1.ResourceSliceMaxDevices) {
		want = append(want, chunk)
	}

	// The newest generation's slices of our pool, owned by the Node, are
	// kept; everything else of the driver on this node goes.
	var gen int64
	var mine []resourcev1.ResourceSlice
	for _, sl := range list.Items {
		if sl.Spec.Driver != s.driver || sl.Spec.NodeName == nil || *sl.Spec.NodeName != s.node {
			continue // a server that does not filter by field (a fake)
		}
		mine = append(mine, sl)
		gen = max(gen, sl.Spec.Pool.Generation)
	}
	slices.SortFunc(mine, func(a, b resourcev1.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	var current, obsolete []resourcev1.ResourceSlice
	for _, sl := range mine {
		if sl.Spec.Pool.Name == s.node && sl.Spec.Pool.Generation == gen && ownedBy(&sl, owner) && len(current) < len(want) {
			current = append(current, sl)
		} else {
			obsolete = append(obsolete, sl)
		}
	}
	pool := resourcev1.ResourcePool{Name: s.node, Generation: gen, ResourceSliceCount: int64(len(want))}
	var changed []int
	for i := range current {
		if !sliceIs(&current[i], pool, want[i]) {
			changed = append(changed, i)
		}
	}
	creates := len(want) - len(current)
	if creates > 0 || len(changed) > 1 {
		pool.Generation = gen + 1
		changed = changed[:0]
		for i := range current {
			changed = append(changed, i)
		}
	}
	if len(obsolete) == 0 && len(changed) == 0 && creates == 0 {
		return nil
	}

	for _, sl := range obsolete {
		err := api.Delete(ctx, sl.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sl.UID, ResourceVersion: &sl.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ResourceSlice %s: %w", sl.Name, err)
		}
	}
	for _, i := range changed {
		sl := current[i].DeepCopy()
		sl.OwnerReferences = []metav1.OwnerReference{owner}
		sl.Spec = s.spec(pool, want[i])
		if _, err := api.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update ResourceSlice %s: %w", sl.Name, err)
		}
	}
	for i := len(current); i < len(want); i++ {
		sl := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: s.generateName(), OwnerReferences: []metav1.OwnerReference{owner}},
			Spec:       s.spec(pool, want[i]),
		}
		if _, err := api.Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ResourceSlice: %w", err)
		}
	}
	s.log.Info("published ResourceSlices", "node", s.node, "pool", s.node, "generation", pool.Generation,
		"slices", len(want), "devices", len(devices), "deleted", len(obsolete), "updated", len(changed), "created", creates)
	return nil
}

// owner is the owner reference of the slices: the Node, whose UID is read
// once.
func (s *slicePublisher) owner(ctx context.Context) (metav1.OwnerReference, error) {
	if s.ownerUID == "" {
		node, err := s.client.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
		if err != nil {
			return metav1.OwnerReference{}, fmt.Errorf("read Node %s, the owner of the ResourceSlices: %w", s.node, err)
		}
		if node.UID == "" {
			return metav1.OwnerReference{}, errors.New("Node " + s.node + " has no UID")
		}
		s.ownerUID = node.UID
	}
	controller := true
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: s.node, UID: s.ownerUID, Controller: &controller}, nil
}

func ownedBy(sl *resourcev1.ResourceSlice, owner metav1.OwnerReference) bool {
	return slices.ContainsFunc(sl.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.APIVersion == owner.APIVersion && o.Kind == owner.Kind && o.Name == owner.Name && o.UID == owner.UID
	})
}

// spec is the spec of a slice of the pool holding devices.
func (s *slicePublisher) spec(pool resourcev1.ResourcePool, devices []resourcev1.Device) resourcev1.ResourceSliceSpec {
	node := s.node
	return resourcev1.ResourceSliceSpec{Driver: s.driver, Pool: pool, NodeName: &node, Devices: devices}
}

// sliceIs reports whether sl holds exactly the pool and devices, and
// nothing else.
func sliceIs(sl *resourcev1.ResourceSlice, pool resourcev1.ResourcePool, devices []resourcev1.Device) bool {
	sp := &sl.Spec
	return sp.Pool == pool && sp.NodeSelector == nil && sp.AllNodes == nil && sp.PerDeviceNodeSelection == nil &&
		len(sp.SharedCounters) == 0 && apiequality.Semantic.DeepEqual(sp.Devices, devices)
}

// generateName is NODE-DRIVER-, cut to leave room for the server's random
// suffix within a name's 253 characters.
func (s *slicePublisher) generateName() string {
	name := s.node + "-" + s.driver
	if len(name) > 240 {
		name = name[:240]
	}
	return strings.TrimRight(name, "-.") + "-"
}
