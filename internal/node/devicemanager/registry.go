package devicemanager

import (
	"sort"
	"sync"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ResourceState is where a resource's plugin stands.
type ResourceState string

// Resource states.
const (
	// StateConnecting: registered, ListAndWatch not yet answered.
	StateConnecting ResourceState = "Connecting"
	// StateServing: the plugin streams its devices.
	StateServing ResourceState = "Serving"
	// StateDisconnected: the plugin went away less than a grace period
	// ago; its devices are unhealthy but still in capacity.
	StateDisconnected ResourceState = "Disconnected"
	// StateRestored: known from the checkpoint, not re-registered yet.
	StateRestored ResourceState = "Restored"
	// StateRemoved: gone for longer than the grace period.
	StateRemoved ResourceState = "Removed"
)

// Device is one device as its plugin last reported it.
type Device struct {
	ID      string
	Healthy bool
	NUMA    []int64 // NUMA nodes, empty when the plugin gave none
}

// Resource is a snapshot of one extended resource. Callers own it.
type Resource struct {
	Name        string
	State       ResourceState
	Devices     []Device // sorted by ID
	Capacity    int      // all devices
	Allocatable int      // healthy devices
	Options     PluginOptions
}

// PluginOptions are the options a plugin registered with.
type PluginOptions struct {
	PreStartRequired                bool
	GetPreferredAllocationAvailable bool
}

func pluginOptions(o *pluginapi.DevicePluginOptions) PluginOptions {
	return PluginOptions{PreStartRequired: o.GetPreStartRequired(), GetPreferredAllocationAvailable: o.GetGetPreferredAllocationAvailable()}
}

// resource is the registry's mutable record of one resource.
type resource struct {
	name    string
	state   ResourceState
	ep      *endpoint // nil unless Connecting or Serving
	gen     uint64
	devices map[string]Device
	opts    PluginOptions
	timer   *time.Timer
}

// registry owns the resources; every field is guarded by mu. onChange
// is called with the resource's name after a change, outside mu.
type registry struct {
	mu        sync.Mutex
	resources map[string]*resource
	nextGen   uint64
	grace     time.Duration
	onChange  func(resource string)
	stopped   bool // after stopAll, endpoints' endings change nothing
}

func newRegistry(grace time.Duration, onChange func(resource string)) *registry {
	return &registry{resources: map[string]*resource{}, grace: grace, onChange: onChange}
}

func (g *registry) restore(entries []resourceEntry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range entries {
		g.resources[e.Name] = &resource{name: e.Name, state: StateRestored, devices: map[string]Device{},
			opts: PluginOptions{PreStartRequired: e.PreStartRequired}}
	}
}

// startGrace starts the grace period of restored resources.
func (g *registry) startGrace() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.resources {
		if r.state == StateRestored && r.timer == nil {
			g.expireLocked(r)
		}
	}
}

// register records a new endpoint for name, replacing (and stopping) the
// previous one.
func (g *registry) register(name, socket string, opts *pluginapi.DevicePluginOptions) *endpoint {
	g.mu.Lock()
	r := g.resources[name]
	if r == nil {
		r = &resource{name: name, devices: map[string]Device{}}
		g.resources[name] = r
	}
	old := r.ep
	g.nextGen++
	r.gen = g.nextGen
	r.ep = newEndpoint(name, socket, r.gen)
	if r.state != StateServing && r.state != StateDisconnected {
		r.state = StateConnecting
	}
	if opts != nil {
		r.opts = pluginOptions(opts)
	}
	stopTimer(r)
	ep := r.ep
	g.mu.Unlock()
	if old != nil {
		old.stop()
	}
	g.onChange(name)
	return ep
}

// setOptions records the options a plugin reports for its endpoint gen.
func (g *registry) setOptions(name string, gen uint64, opts *pluginapi.DevicePluginOptions) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.resources[name]; r != nil && r.gen == gen && opts != nil {
		r.opts = pluginOptions(opts)
	}
}

// setDevices replaces the device list of name, if gen is still current.
func (g *registry) setDevices(name string, gen uint64, devs []*pluginapi.Device) {
	g.mu.Lock()
	r := g.resources[name]
	if r == nil || r.gen != gen {
		g.mu.Unlock()
		return
	}
	r.devices = make(map[string]Device, len(devs))
	for _, d := range devs {
		var numa []int64
		for _, n := range d.GetTopology().GetNodes() {
			numa = append(numa, n.GetID())
		}
		// A repeated ID within one message: the last one wins, as in
		// the kubelet.
		r.devices[d.GetID()] = Device{ID: d.GetID(), Healthy: d.GetHealth() == pluginapi.Healthy, NUMA: numa}
	}
	r.state = StateServing
	stopTimer(r)
	g.mu.Unlock()
	g.onChange(name)
}

// disconnected marks every device of name unhealthy at once and removes
// the resource after the grace period unless the plugin registers again.
func (g *registry) disconnected(name string, gen uint64) {
	g.mu.Lock()
	r := g.resources[name]
	if g.stopped || r == nil || r.gen != gen || r.state == StateRemoved {
		g.mu.Unlock()
		return
	}
	r.ep = nil
	r.state = StateDisconnected
	for id, d := range r.devices {
		d.Healthy = false
		r.devices[id] = d
	}
	g.expireLocked(r)
	g.mu.Unlock()
	g.onChange(name)
}

func (g *registry) expireLocked(r *resource) {
	gen := r.gen
	stopTimer(r)
	r.timer = time.AfterFunc(g.grace, func() {
		g.mu.Lock()
		if g.stopped || r.gen != gen || r.ep != nil || r.state == StateRemoved {
			g.mu.Unlock()
			return
		}
		r.state = StateRemoved
		r.devices = map[string]Device{}
		g.mu.Unlock()
		g.onChange(r.name)
	})
}

func stopTimer(r *resource) {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// stopAll disconnects every endpoint (the Manager stops).
func (g *registry) stopAll() {
	g.mu.Lock()
	g.stopped = true
	var eps []*endpoint
	for _, r := range g.resources {
		if r.ep != nil {
			eps = append(eps, r.ep)
		}
		stopTimer(r)
	}
	g.mu.Unlock()
	for _, ep := range eps {
		ep.stop()
	}
}

// endpoint returns the live endpoint of name, or nil.
func (g *registry) endpoint(name string) (*endpoint, PluginOptions) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.resources[name]
	if r == nil || r.state != StateServing {
		return nil, PluginOptions{}
	}
	return r.ep, r.opts
}

// resource returns a snapshot of name.
func (g *registry) resource(name string) (Resource, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.resources[name]
	if r == nil {
		return Resource{}, false
	}
	return r.snapshot(), true
}

// snapshot returns every resource, sorted by name.
func (g *registry) snapshot() []Resource {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Resource, 0, len(g.resources))
	for _, r := range g.resources {
		out = append(out, r.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *resource) snapshot() Resource {
	s := Resource{Name: r.name, State: r.state, Options: r.opts}
	for _, d := range r.devices {
		d.NUMA = append([]int64(nil), d.NUMA...)
		s.Devices = append(s.Devices, d)
		if d.Healthy {
			s.Allocatable++
		}
	}
	sort.Slice(s.Devices, func(i, j int) bool { return s.Devices[i].ID < s.Devices[j].ID })
	s.Capacity = len(s.Devices)
	return s
}
