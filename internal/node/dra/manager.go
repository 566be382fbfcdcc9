package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/pidlock"
	"allot.dev/allot/pkg/client"
)

// Defaults for Options.
const (
	DefaultSliceGracePeriod = 30 * time.Second
	DefaultPrepareTimeout   = 30 * time.Second
	DefaultBackoffInitial   = time.Second
	DefaultBackoffMax       = 2 * time.Minute
	DefaultRPCTimeout       = 10 * time.Second
	DefaultRedialInterval   = time.Second
	DefaultAPITimeout       = 30 * time.Second
	// MaxRedials is how many times a broken resource stream is re-opened
	// (Options.RedialInterval apart) before its driver counts as gone.
	MaxRedials = 3
)

// ErrInvalidOptions is returned (wrapped) by New for Options it cannot run.
var ErrInvalidOptions = errors.New("invalid DRA manager options")

// EventRecorder records events; client.EventRecorder is one.
type EventRecorder interface {
	Eventf(obj k8sruntime.Object, typ, reason, format string, args ...any)
}

// Options configure a Manager. Zero durations take defaults.
type Options struct {
	// NodeName is this node. Required.
	NodeName string
	// Client talks to the API server, normally with the node's identity.
	// Required.
	Client *client.Client
	// RegistryDir is where plugins create their registration sockets.
	// Required; created if missing.
	RegistryDir string
	// CheckpointDir holds the checkpoint of prepared claims; empty keeps
	// them in memory only.
	CheckpointDir string
	// SliceGracePeriod is how long the slice of a driver that went away
	// (or that has not registered since the start) is kept.
	SliceGracePeriod time.Duration
	// PrepareTimeout bounds each NodePrepareResources and
	// NodeUnprepareResources call.
	PrepareTimeout time.Duration
	// BackoffInitial and BackoffMax bound the exponential back-off between
	// failed prepare (and unprepare) attempts of a pod.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// RPCTimeout bounds the registration calls (GetInfo,
	// NotifyRegistrationStatus).
	RPCTimeout time.Duration
	// RedialInterval separates attempts to re-open a broken resource
	// stream.
	RedialInterval time.Duration
	// APITimeout bounds each API call.
	APITimeout time.Duration
	// Wake asks for a sync of the pod with this UID; nil does nothing. It
	// must not block.
	Wake func(podUID types.UID)
	// Events records events about the Node (invalid resource models); nil
	// records none.
	Events EventRecorder
	Logger *slog.Logger
}

func (o *Options) validate() error {
	switch {
	case o.NodeName == "":
		return fmt.Errorf("%w: NodeName is required", ErrInvalidOptions)
	case len(validation.IsDNS1123Subdomain(o.NodeName)) > 0:
		return fmt.Errorf("%w: NodeName %q is not a DNS subdomain", ErrInvalidOptions, o.NodeName)
	case o.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrInvalidOptions)
	case o.RegistryDir == "":
		return fmt.Errorf("%w: RegistryDir is required", ErrInvalidOptions)
	}
	return nil
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.SliceGracePeriod, DefaultSliceGracePeriod)
	def(&o.PrepareTimeout, DefaultPrepareTimeout)
	def(&o.BackoffInitial, DefaultBackoffInitial)
	def(&o.BackoffMax, DefaultBackoffMax)
	def(&o.RPCTimeout, DefaultRPCTimeout)
	def(&o.RedialInterval, DefaultRedialInterval)
	def(&o.APITimeout, DefaultAPITimeout)
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.Wake == nil {
		o.Wake = func(types.UID) {}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Manager is the node's DRA manager. Its methods are safe for concurrent
// use.
type Manager struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics

	drivers *driverSet
	slices  *slicePublisher
	// published keeps the Node's status.preparedResourceClaims in step
	// with store.
	published *claimPublisher
	// store owns the prepared claims and writes the checkpoint; locks
	// serialises prepare and unprepare per claim UID.
	store *claimStore
	locks keyedMutex
	// health owns the health of the drivers' instances.
	health *instanceHealth
	// devHealth owns the health kubelet drivers stream of their devices.
	devHealth *deviceHealthSet
	pods      *podStates
	node      nodeCache

	// claims and claimsV1 are set by Start; Admit may be called once
	// Start returned. A claim is in one of them, by the version it is
	// stored as (the informers leave views out).
	claims   *client.Lister[*resourcev1alpha2.ResourceClaim]
	claimsV1 *client.Lister[*resourcev1.ResourceClaim]

	startMu sync.Mutex
	started bool
	unlock  func() // releases the registry dir's lock (lockRegistry)
	cancel  context.CancelFunc
	ctx     context.Context // the run's, for timers (runContext)
	factory *client.Factory
	wg      sync.WaitGroup
}

var (
	_ pods.Admitter            = (*Manager)(nil)
	_ pods.Releaser            = (*Manager)(nil)
	_ pods.ContainerConfigurer = (*Manager)(nil)
	_ pods.HealthReporter      = (*Manager)(nil)
	_ pods.Monitor             = (*Manager)(nil)
)

// New validates opts and returns a Manager with the checkpoint's prepared
// claims restored.
func New(opts Options) (*Manager, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	m := &Manager{opts: opts, log: opts.Logger, metrics: newMetrics()}
	m.drivers = newDriverSet()
	m.pods = newPodStates()
	m.health = newInstanceHealth()
	m.devHealth = newDeviceHealthSet()
	m.node = nodeCache{m: m}
	m.slices = newSlicePublisher(m)
	m.published = newClaimPublisher(m)
	path := ""
	if opts.CheckpointDir != "" {
		path = filepath.Join(opts.CheckpointDir, CheckpointFile)
	}
	store, err := loadClaimStore(path)
	if err != nil {
		return nil, err
	}
	m.store = store
	m.metrics.prepared.Set(float64(store.count()))
	return m, nil
}

// Start syncs the informers of claims (of both versions) and of this
// node's slices, then serves plugin registrations, publishes slices and
// unprepares the claims of pods that ended while no agent ran, until ctx
// ends or Stop is called. It returns an error when the registry directory
// cannot be watched or ctx ends before the caches synced.
func (m *Manager) Start(ctx context.Context) (err error) {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	if m.started {
		return errors.New("DRA manager already started")
	}
	m.started = true
	if err := os.MkdirAll(m.opts.RegistryDir, 0o750); err != nil {
		return fmt.Errorf("create plugins registry dir: %w", err)
	}
	unlock, err := lockRegistry(m.opts.RegistryDir)
	if err != nil {
		return err
	}
	m.unlock = unlock
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	m.cancel, m.ctx = cancel, ctx
	m.factory = client.NewFactory(m.opts.Client, 0, client.WithoutManagedFields(),
		client.WithTweakFor("noderesourceslices", client.WithFieldSelector("spec.nodeName="+m.opts.NodeName)))
	claims := m.factory.ResourceClaims()
	if _, err := claims.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.onClaim,
		UpdateFunc: func(_, obj any) { m.onClaim(obj) },
		DeleteFunc: m.onClaim,
	})); err != nil {
		return fmt.Errorf("watch resource claims: %w", err)
	}
	lister := claims.Lister()
	m.claims = &lister
	claimsV1 := m.factory.ResourceClaimsV1()
	if _, err := claimsV1.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.onClaim,
		UpdateFunc: func(_, obj any) { m.onClaim(obj) },
		DeleteFunc: m.onClaim,
	})); err != nil {
		return fmt.Errorf("watch resource.k8s.io/v1 resource claims: %w", err)
	}
	listerV1 := claimsV1.Lister()
	m.claimsV1 = &listerV1
	if _, err := m.factory.NodeResourceSlices().AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.slices.observe(obj, false) },
		UpdateFunc: func(_, obj any) { m.slices.observe(obj, false) },
		DeleteFunc: func(obj any) { m.slices.observe(obj, true) },
	})); err != nil {
		return fmt.Errorf("watch node resource slices: %w", err)
	}
	m.factory.Start(ctx)
	if err := m.factory.WaitForCacheSync(ctx); err != nil {
		return err
	}
	w, err := m.watchRegistry()
	if err != nil {
		return err
	}
	if err := m.node.refresh(ctx); err != nil {
		m.log.Warn("DRA manager: read this node (read again when needed)", "err", err)
	}
	m.goRun(func() { m.slices.run(ctx) })
	m.goRun(func() { m.published.run(ctx) })
	m.goRun(func() { m.runRegistry(ctx, w) })
	m.goRun(func() { m.reconcile(ctx) })
	m.goRun(func() { m.graceForV1Slices(ctx) })
	m.log.Info("DRA manager started", "registry", m.opts.RegistryDir)
	return nil
}

func (m *Manager) goRun(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Stop ends the Manager's goroutines and disconnects every driver. Slices
// and the checkpoint stay.
func (m *Manager) Stop() {
	m.startMu.Lock()
	cancel, f := m.cancel, m.factory
	m.startMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	m.wg.Wait()
	for _, d := range m.drivers.stopAll() {
		d.stop()
	}
	m.pods.stopTimers()
	f.Shutdown()
	if m.unlock != nil {
		m.unlock()
	}
}

// onClaim wakes the pods waiting for a claim (of either version) that
// changed.
func (m *Manager) onClaim(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var key string
	switch claim := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		key = claim.Namespace + "/" + claim.Name
	case *resourcev1.ResourceClaim:
		key = claim.Namespace + "/" + claim.Name
	default:
		return
	}
	for _, uid := range m.pods.waitingForClaim(key) {
		m.opts.Wake(uid)
	}
}

// runContext is the context of the Manager's run (Start to Stop).
func (m *Manager) runContext() context.Context {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	if m.ctx == nil {
		return context.Background()
	}
	return m.ctx
}

// apiContext bounds one API call.
func (m *Manager) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.opts.APITimeout)
}

// backoff is the delay after the n-th consecutive failure (n >= 1).
func (m *Manager) backoff(n int) time.Duration {
	d := m.opts.BackoffInitial
	for i := 1; i < n && d < m.opts.BackoffMax; i++ {
		d *= 2
	}
	return min(d, m.opts.BackoffMax)
}

// registryLock is the file in the plugins registry dir a Manager holds
// locked while it runs (the registration watch ignores all but sockets).
const registryLock = ".allot-node-agent.lock"

// lockRegistry takes the registry dir for this Manager: a second agent on
// the same host and dir (another allot up with the default dir) would
// register every driver there with its own node too, and their devices
// would be handed out twice, once per node. The lock goes with the
// process; the returned func releases it (once).
func lockRegistry(dir string) (func(), error) {
	release, err := pidlock.Lock(filepath.Join(dir, registryLock))
	var held *pidlock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, fmt.Errorf("plugins registry dir %s is watched by another node agent on this host (%s): its DRA drivers would register with both nodes "+
			"and their devices be handed out twice; give this agent its own directory with --plugins-registry-dir, or an empty one to run without DRA", dir, held.Holder())
	case err != nil:
		return nil, fmt.Errorf("lock plugins registry dir %s: %w", dir, err)
	}
	return release, nil
}
