package dra

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// driver is the connection to one registered driver's DRA socket. Its
// fields are set once; stop cancels every call in flight.
type driver struct {
	name      string
	endpoint  string // the DRA socket
	regSocket string // the registration socket it came through
	seq       uint64 // when its registration socket was seen
	gen       uint64

	ctx    context.Context
	cancel context.CancelFunc
	conn   *grpc.ClientConn
	client drapb.NodeClient
}

// dialDriver connects lazily: gRPC dials on the first call and reconnects
// by itself. The driver's life ends with ctx (the Manager's) or stop.
func dialDriver(ctx context.Context, name, endpoint, regSocket string, seq uint64) (*driver, error) {
	conn, err := newConn(endpoint)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &driver{name: name, endpoint: endpoint, regSocket: regSocket, seq: seq, ctx: ctx, cancel: cancel,
		conn: conn, client: drapb.NewNodeClient(conn)}, nil
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
type driverSet struct {
	mu      sync.Mutex
	live    map[string]*driver
	grace   map[string]*time.Timer
	nextGen uint64
	stopped bool
}

func newDriverSet() *driverSet {
	return &driverSet{live: map[string]*driver{}, grace: map[string]*time.Timer{}}
}

// errSuperseded refuses a registration that finished after a later one of
// the same driver.
var errSuperseded = errors.New("a later registration of this driver is current")

// errStopping refuses a registration while the manager stops.
var errStopping = errors.New("the DRA manager is stopping")

// add makes d the driver of its name and returns the one it replaces. It
// refuses d when the current driver's socket was seen after d's.
func (s *driverSet) add(d *driver) (old *driver, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errStopping
	}
	if cur := s.live[d.name]; cur != nil && cur.seq > d.seq {
		return nil, errSuperseded
	}
	s.nextGen++
	d.gen = s.nextGen
	old = s.live[d.name]
	s.live[d.name] = d
	if t := s.grace[d.name]; t != nil {
		t.Stop()
		delete(s.grace, d.name)
	}
	return old, nil
}

// remove drops d if it is still its name's driver, and starts the grace
// period of its slice: expire runs after grace unless the driver
// registers again.
func (s *driverSet) remove(d *driver, grace time.Duration, expire func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.live[d.name] != d {
		return false
	}
	delete(s.live, d.name)
	s.startGraceLocked(d.name, grace, expire)
	return true
}

// startGrace starts the grace period of name's slice unless the driver is
// registered or already in its grace period.
func (s *driverSet) startGrace(name string, grace time.Duration, expire func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.live[name] != nil || s.grace[name] != nil {
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
		current := s.grace[name] == t && s.live[name] == nil && !s.stopped
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

// get returns the registered driver of name.
func (s *driverSet) get(name string) *driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[name]
}

// isLive reports whether d is still its name's driver.
func (s *driverSet) isLive(d *driver) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[d.name] == d
}

// byRegSocket returns the driver that registered through path.
func (s *driverSet) byRegSocket(path string) *driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.live {
		if d.regSocket == path {
			return d
		}
	}
	return nil
}

// names returns the registered drivers' names, sorted.
func (s *driverSet) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.live))
	for n := range s.live {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// stopAll forgets every driver and timer and returns the drivers to stop.
func (s *driverSet) stopAll() []*driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	out := make([]*driver, 0, len(s.live))
	for _, d := range s.live {
		out = append(out, d)
	}
	for _, t := range s.grace {
		t.Stop()
	}
	s.live, s.grace = map[string]*driver{}, map[string]*time.Timer{}
	return out
}

// registerDriver makes a driver of a validated registration the current
// one of its name, replacing (and disconnecting) an earlier one, and
// starts following its resources.
func (m *Manager) registerDriver(ctx context.Context, name, endpoint, regSocket string, seq uint64) error {
	d, err := dialDriver(ctx, name, endpoint, regSocket, seq)
	if err != nil {
		return err
	}
	old, err := m.drivers.add(d)
	if err != nil {
		d.stop()
		return err
	}
	if old != nil {
		old.stop()
		m.log.Info("DRA driver registration replaced", "driver", name, "endpoint", endpoint)
	} else {
		m.log.Info("DRA driver registered", "driver", name, "endpoint", endpoint)
	}
	m.metrics.drivers.Set(float64(len(m.drivers.names())))
	m.goRun(func() { m.runDriver(d) })
	for _, uid := range m.pods.driverRegistered(name) {
		m.opts.Wake(uid)
	}
	return nil
}

// unregisterDriver disconnects d if it is still current; its slice goes
// after the grace period unless the driver comes back.
func (m *Manager) unregisterDriver(d *driver, why string) {
	if !m.drivers.remove(d, m.opts.SliceGracePeriod, func() { m.slices.remove(d.name) }) {
		return
	}
	d.stop()
	if m.health.forget(d.name) {
		m.healthChanged(d.name)
	}
	m.metrics.drivers.Set(float64(len(m.drivers.names())))
	m.log.Warn("DRA driver unregistered", "driver", d.name, "reason", why, "sliceGracePeriod", m.opts.SliceGracePeriod)
}
