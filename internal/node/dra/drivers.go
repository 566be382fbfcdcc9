package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// driver is the connection to one registered driver's DRA socket. Its
// fields are set once; stop cancels every call in flight.
//
// A driver speaks allot's node API (api/dra/v1alpha1: resources streamed
// to the node agent, claims prepared from the handles the agent sends) or
// the kubelet's (k8s.io/kubelet dra/v1 or v1beta1: the driver publishes
// its own ResourceSlices and reads each claim it is asked to prepare);
// reg says which, and which services it offered.
type driver struct {
	name      string
	endpoint  string // the DRA socket
	regSocket string // the registration socket it came through
	seq       uint64 // when its registration socket was seen
	gen       uint64
	reg       registration

	ctx    context.Context
	cancel context.CancelFunc
	conn   *grpc.ClientConn
	client drapb.NodeClient // allot drivers
	// kubelet is the kubelet API's client of kubelet drivers (a
	// v1beta1 driver through the converting wrapper).
	kubelet drapbv1.DRAPluginClient
}

// dialDriver connects lazily: gRPC dials on the first call and reconnects
// by itself. The driver's life ends with ctx (the Manager's) or stop.
func dialDriver(ctx context.Context, reg registration, endpoint, regSocket string, seq uint64) (*driver, error) {
	conn, err := newConn(endpoint)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &driver{name: reg.name, endpoint: endpoint, regSocket: regSocket, seq: seq, reg: reg, ctx: ctx, cancel: cancel, conn: conn}
	switch reg.service {
	case drapbv1.DRAPluginService:
		d.kubelet = drapbv1.NewDRAPluginClient(conn)
	case drapbv1beta1.DRAPluginService:
		d.kubelet = drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(conn)}
	default:
		d.client = drapb.NewNodeClient(conn)
	}
	return d, nil
}

// isKubelet reports whether d speaks the kubelet's DRA API.
func (d *driver) isKubelet() bool { return d.kubelet != nil }

// reachable reports whether d's connection is not known to be broken.
func (d *driver) reachable() bool {
	if d.conn == nil { // not dialled (tests of the set)
		return true
	}
	s := d.conn.GetState()
	return s != connectivity.TransientFailure && s != connectivity.Shutdown
}

// newConn returns a lazy gRPC client of the unix socket path. Its
// reconnect back-off starts at 100ms, not gRPC's 1s: a socket file exists
// (and fsnotify reports it) a moment before its server listens, and a
// first refused connection must not delay a registration by a second.
func newConn(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}))
}

func (d *driver) stop() {
	d.cancel()
	_ = d.conn.Close() // the connection is abandoned either way
}

// callContext bounds a call to the driver by timeout, the caller's
// context and the driver's life (a replaced driver's calls end).
func (d *driver) callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	stop := context.AfterFunc(d.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// driverSet owns the registered drivers and the grace timers of drivers
// whose slices wait for them to come back. Every field is guarded by mu.
//
// A name has one instance when its driver speaks allot's API (its
// resource stream must have one source: a new registration replaces the
// old one) and one or more when it speaks the kubelet's (a rolling update
// starts the new instance, with its own sockets, before the old one
// stops; calls go to the newest reachable instance, as the kubelet's).
type driverSet struct {
	mu      sync.Mutex
	live    map[string][]*driver // oldest first
	grace   map[string]*time.Timer
	nextGen uint64
	stopped bool
}

func newDriverSet() *driverSet {
	return &driverSet{live: map[string][]*driver{}, grace: map[string]*time.Timer{}}
}

// errSuperseded refuses a registration that finished after a later one of
// the same driver.
var errSuperseded = errors.New("a later registration of this driver is current")

// errStopping refuses a registration while the manager stops.
var errStopping = errors.New("the DRA manager is stopping")

// add makes d an instance of its name and returns those it replaces:
// every instance when either d or the current ones speak allot's API,
// otherwise the instance that came through d's registration socket
// before. It refuses d when the instance it would replace was seen after
// it, and a kubelet driver whose endpoint another live instance serves.
func (s *driverSet) add(d *driver) (old []*driver, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errStopping
	}
	cur := s.live[d.name]
	var keep []*driver
	for _, c := range cur {
		replaced := !d.isKubelet() || !c.isKubelet() || c.regSocket == d.regSocket
		switch {
		case replaced && c.seq > d.seq:
			return nil, errSuperseded
		case replaced:
			old = append(old, c)
		case c.endpoint == d.endpoint:
			return nil, fmt.Errorf("%w: endpoint %s is already registered through %s", ErrInvalidEndpoint, d.endpoint, c.regSocket)
		default:
			keep = append(keep, c)
		}
	}
	s.nextGen++
	d.gen = s.nextGen
	s.live[d.name] = append(keep, d)
	if t := s.grace[d.name]; t != nil {
		t.Stop()
		delete(s.grace, d.name)
	}
	return old, nil
}

// remove drops d if it is still an instance of its name; when it was the
// last, it starts the grace period of the name's slices: expire runs after
// grace unless the driver registers again. last reports that.
func (s *driverSet) remove(d *driver, grace time.Duration, expire func()) (removed, last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.live[d.name]
	i := slices.Index(cur, d)
	if s.stopped || i < 0 {
		return false, false
	}
	cur = slices.Delete(slices.Clone(cur), i, i+1)
	if len(cur) > 0 {
		s.live[d.name] = cur
		return true, false
	}
	delete(s.live, d.name)
	s.startGraceLocked(d.name, grace, expire)
	return true, true
}

// startGrace starts the grace period of name's slice unless the driver is
// registered or already in its grace period.
func (s *driverSet) startGrace(name string, grace time.Duration, expire func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || len(s.live[name]) > 0 || s.grace[name] != nil {
		return
	}
	s.startGraceLocked(name, grace, expire)
}

func (s *driverSet) startGraceLocked(name string, grace time.Duration, expire func()) {
	if t := s.grace[name]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(grace, func() {
		s.mu.Lock()
		current := s.grace[name] == t && len(s.live[name]) == 0 && !s.stopped
		if current {
			delete(s.grace, name)
		}
		s.mu.Unlock()
		if current {
			expire()
		}
	})
	s.grace[name] = t
}

// get returns the instance of name to call: the newest reachable one,
// else the newest.
func (s *driverSet) get(name string) *driver {
	s.mu.Lock()
	cur := s.live[name]
	s.mu.Unlock()
	for i := len(cur) - 1; i >= 0; i-- {
		if cur[i].reachable() {
			return cur[i]
		}
	}
	if len(cur) == 0 {
		return nil
	}
	return cur[len(cur)-1]
}

// isLive reports whether d is still an instance of its name.
func (s *driverSet) isLive(d *driver) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.live[d.name], d)
}

// byRegSocket returns the instance that registered through path.
func (s *driverSet) byRegSocket(path string) *driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cur := range s.live {
		for _, d := range cur {
			if d.regSocket == path {
				return d
			}
		}
	}
	return nil
}

// names returns the registered drivers' names, sorted.
func (s *driverSet) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.live))
}

// stopAll forgets every driver and timer and returns the instances to stop.
func (s *driverSet) stopAll() []*driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	var out []*driver
	for _, cur := range s.live {
		out = append(out, cur...)
	}
	for _, t := range s.grace {
		t.Stop()
	}
	s.live, s.grace = map[string][]*driver{}, map[string]*time.Timer{}
	return out
}

// registerDriver makes a driver of a validated registration an instance
// of its name, replacing (and disconnecting) the ones it supersedes, and
// starts following its resources.
func (m *Manager) registerDriver(ctx context.Context, reg registration, endpoint, regSocket string, seq uint64) error {
	d, err := dialDriver(ctx, reg, endpoint, regSocket, seq)
	if err != nil {
		return err
	}
	old, err := m.drivers.add(d)
	if err != nil {
		d.stop()
		return err
	}
	for _, o := range old {
		o.stop()
	}
	if len(old) > 0 {
		m.log.Info("DRA driver registration replaced", "driver", reg.name, "endpoint", endpoint, "service", reg.service)
	} else {
		m.log.Info("DRA driver registered", "driver", reg.name, "endpoint", endpoint, "service", reg.service)
	}
	m.metrics.drivers.Set(float64(len(m.drivers.names())))
	m.goRun(func() { m.switchPublishing(d) })
	if d.isKubelet() {
		m.goRun(func() { m.runHealth(d) })
		m.goRun(func() { m.watchConnection(d) })
	} else {
		m.goRun(func() { m.runDriver(d) })
	}
	for _, uid := range m.pods.driverRegistered(reg.name) {
		m.opts.Wake(uid)
	}
	return nil
}

// unregisterDriver disconnects d if it is still an instance of its name.
// When it was the last one, the driver's slices go after the grace period
// unless it comes back: its NodeResourceSlice, and the v1 ResourceSlices
// of this node it published itself when it speaks the kubelet API.
func (m *Manager) unregisterDriver(d *driver, why string) {
	removed, last := m.drivers.remove(d, m.opts.SliceGracePeriod, func() { m.expireDriver(d.name) })
	if !removed {
		return
	}
	d.stop()
	if !last {
		m.log.Info("DRA driver instance unregistered; others remain", "driver", d.name, "endpoint", d.endpoint, "reason", why)
		return
	}
	forgotSeed, forgotDevices := m.health.forget(d.name), m.devHealth.forget(d.name)
	if forgotSeed || forgotDevices {
		m.healthChanged(d.name)
	}
	m.metrics.drivers.Set(float64(len(m.drivers.names())))
	m.log.Warn("DRA driver unregistered", "driver", d.name, "reason", why, "sliceGracePeriod", m.opts.SliceGracePeriod)
}
