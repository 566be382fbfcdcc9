package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/devicemanager"
	"allot.dev/allot/internal/node/dra"
	"allot.dev/allot/internal/node/logs"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/podresources"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/pkg/client"
)

// Agent is one node's agent. Create it with New, then call Run once.
type Agent struct {
	cfg     Config
	podCfg  pods.Config
	beatNow chan struct{}

	// Set by prepare, before any goroutine reads them.
	node     nodeState
	disp     *dispatcher
	listener net.Listener
	// serving is the log server's certificate; servingIPs the addresses
	// it must hold (the InternalIP).
	serving    *servingCert
	servingIPs []net.IP
	events     *client.EventRecorder
	devices    *devicemanager.Manager // nil without DevicePluginDir
	dra        *dra.Manager           // nil without PluginsRegistryDir
	fence      *selfFence             // nil when disabled
	gate       *returnGate
}

// New validates cfg and creates an agent.
func New(cfg Config) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	a := &Agent{cfg: cfg, beatNow: make(chan struct{}, 1)}
	a.gate = newReturnGate(a)
	if err := a.newDRAManager(); err != nil {
		return nil, err
	}
	if err := a.newDeviceManager(); err != nil {
		return nil, err
	}
	a.newSelfFence()
	cfg = a.cfg
	api := pods.ClientAPI(cfg.Client)
	if a.fence != nil {
		api = fencedAPI{API: api, f: a.fence}
	}
	a.podCfg = pods.Config{
		NodeName: cfg.NodeName, RootDir: cfg.RootDir, Runtime: cfg.Runtime,
		API: api, Hooks: a.withDefaultHooks(cfg.Hooks), Metrics: cfg.Metrics,
		Logger: cfg.Logger.With("node", cfg.NodeName), StatusUpdates: !cfg.DisableStatusUpdates,
		Timing: cfg.Pods,
	}
	a.podCfg.SetDefaults()
	a.cfg.Pods = a.podCfg.Timing
	return a, nil
}

// Run runs the agent until ctx ends: see the package documentation. It
// returns an error only when the agent cannot start.
func Run(ctx context.Context, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Metrics returns the agent's metrics (Metrics.Registry is set unless the
// caller supplied its own Metrics).
func (a *Agent) Metrics() *metrics.Metrics { return a.cfg.Metrics }

// UpdateNodeStatus asks for a heartbeat now, to publish what a
// NodeDecorator changed.
func (a *Agent) UpdateNodeStatus() {
	select {
	case a.beatNow <- struct{}{}:
	default:
	}
}

// Run registers the node and runs its pods until ctx ends. Containers are
// left running when it returns, for the next agent to adopt, unless
// Config.StopContainersOnExit is set.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := a.prepare(ctx); err != nil {
		return err
	}
	defer a.shutdown()
	if a.cfg.StopContainersOnExit {
		// Deferred before the rest: it runs once the pod workers have
		// ended, on every way out, stopped while starting included.
		defer a.stopContainers()
	}
	if a.dra != nil {
		if err := a.dra.Start(ctx); err != nil {
			if ctx.Err() != nil { // stopped while starting
				a.disp.wait()
				return nil
			}
			return fmt.Errorf("start DRA manager: %w", err)
		}
		defer a.dra.Stop()
	}
	if a.devices != nil {
		if err := a.devices.Start(ctx); err != nil {
			return fmt.Errorf("start device manager: %w", err)
		}
		defer a.devices.Stop()
	}
	sel := client.WithFieldSelector("spec.nodeName=" + a.cfg.NodeName)
	f := client.NewFactory(a.cfg.Client, 0, client.WithoutManagedFields(), client.WithTweakFor("pods", sel))
	inf := f.Pods()
	a.gate.useCache(func() ([]*corev1.Pod, bool, error) {
		pods, err := inf.Lister().List(labels.Everything())
		return pods, inf.HasSynced(), err
	})
	if _, err := inf.AddEventHandler(a.disp.handler()); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	f.Start(ctx)
	defer func() { cancel(); f.Shutdown() }()
	if err := f.WaitForCacheSync(ctx); err != nil {
		// Only the end of ctx stops the wait: stopped while starting.
		a.disp.wait()
		return nil
	}
	if a.cfg.PodResourcesSocket != "" {
		served := a.servePodResources(ctx, inf.Lister())
		defer func() { cancel(); <-served }()
	}
	a.serve(ctx, 0)
	return nil
}

// servePodResources serves the PodResources API until ctx ends; a socket
// it cannot listen on is logged, not fatal. The channel closes when done.
// It reports the device manager's devices and, with DRA, the DRA
// manager's (dynamic_resources).
func (a *Agent) servePodResources(ctx context.Context, lister client.Lister[*corev1.Pod]) <-chan struct{} {
	var devices podresources.Devices
	if a.devices != nil {
		devices = a.devices
	}
	var opts []podresources.Option
	if a.dra != nil {
		opts = append(opts, podresources.WithDynamicResources(a.dra))
	}
	srv := podresources.New(devices, func() []*corev1.Pod {
		pods, err := lister.List(labels.Everything())
		if err != nil {
			return nil
		}
		return pods
	}, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := srv.Serve(ctx, a.cfg.PodResourcesSocket)
		if fb := a.cfg.PodResourcesFallbackSocket; errors.Is(err, podresources.ErrInUse) && fb != "" {
			a.cfg.Logger.Info("another node agent on this host serves the PodResources API at its default socket; serving this node's on the fallback",
				"default", a.cfg.PodResourcesSocket, "socket", fb)
			err = srv.Serve(ctx, fb)
		}
		if err != nil {
			a.cfg.Logger.Warn("pod resources API not served", "err", err)
		}
	}()
	return done
}

// prepare binds the log server, registers the node, lists the runtime's
// containers for adoption and creates the dispatcher. Pod events may be
// delivered once it returns.
func (a *Agent) prepare(ctx context.Context) error {
	if err := a.listen(ctx); err != nil {
		return err
	}
	if err := a.registerUntilDone(ctx); err != nil {
		a.closeListener()
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, a.podCfg.Timing.RuntimeTimeout)
	existing, err := a.cfg.Runtime.List(lctx)
	cancel()
	if err != nil {
		a.closeListener()
		return fmt.Errorf("list containers for adoption: %w", err)
	}
	if !a.cfg.DisableEvents {
		a.events = client.NewEventRecorder(a.cfg.Client, "allot-node", a.cfg.NodeName)
		a.podCfg.Events = a.events
	}
	a.disp = newDispatcher(ctx, &a.podCfg, existing)
	return nil
}

// shutdown releases what prepare acquired; call after the workers ended.
func (a *Agent) shutdown() {
	a.closeListener()
	if a.events != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.events.Shutdown(ctx)
	}
}

// listen gets the log server its serving certificate, binds it over TLS
// and fills in the node's addresses and port.
func (a *Agent) listen(ctx context.Context) error {
	ip := a.cfg.NodeIP
	if ip == "" {
		detected, err := DetectNodeIP(a.cfg.Client.RESTConfig().Host)
		switch {
		case err != nil && a.cfg.LogListen != "":
			return err // the API server could not reach the log server
		case err != nil:
			a.cfg.Logger.Warn("no InternalIP address", "err", err)
		}
		ip = detected
	}
	hostname := a.cfg.Hostname
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	if ip != "" {
		a.node.addrs = append(a.node.addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		a.podCfg.HostIP = ip
	}
	if hostname != "" {
		a.node.addrs = append(a.node.addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
	}
	vctx, cancel := context.WithTimeout(context.Background(), a.podCfg.Timing.RuntimeTimeout)
	a.node.rtString = a.cfg.Runtime.RuntimeVersion(vctx)
	cancel()
	if a.cfg.LogListen == "" {
		return nil
	}
	sc, err := newServingCert(a.cfg.RootDir, a.cfg.NodeName, a.cfg.Client.RESTConfig())
	if err != nil {
		return err
	}
	a.servingIPs = nil
	if p := net.ParseIP(ip); p != nil {
		a.servingIPs = []net.IP{p}
	}
	// Like registration, retried until it succeeds or ctx ends (the API
	// server may start after the agent), unless a usable certificate is
	// kept.
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 30*time.Second) {
		cctx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
		err = sc.ensure(cctx, a.servingIPs)
		cancel()
		if err == nil {
			break
		}
		if sc.cur.Load() != nil {
			a.cfg.Logger.Warn("log server: keeping the current serving certificate", "err", err)
			break
		}
		a.cfg.Logger.Warn("log server: get a serving certificate", "err", err, "retry", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("log server: %w", err)
		case <-time.After(delay):
		}
	}
	a.serving = sc
	ln, err := net.Listen("tcp", a.cfg.LogListen)
	if err != nil {
		return fmt.Errorf("listen for logs on %s: %w", a.cfg.LogListen, err)
	}
	a.listener = tls.NewListener(ln, sc.tlsConfig())
	a.node.port = int32(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

func (a *Agent) closeListener() {
	if a.listener != nil {
		a.listener.Close()
	}
}

// serve runs the agent's loops once its pods have synced, until ctx ends.
// firstBeat delays the first heartbeat (spreads simulated nodes).
func (a *Agent) serve(ctx context.Context, firstBeat time.Duration) {
	if cs := a.disp.leftovers(); len(cs) > 0 {
		a.removeOrphans(ctx, cs)
	}
	a.removeStalePodDirs()
	done := make(chan struct{})
	go func() { defer close(done); a.relistLoop(ctx) }()
	if a.listener != nil {
		a.serveLogs(ctx)
	}
	if a.fence != nil {
		go a.fence.loop(ctx)
	}
	a.heartbeatLoop(ctx, firstBeat) // returns when ctx ends
	<-done
	a.disp.wait()
}

// serveLogs serves the log server until ctx ends.
func (a *Agent) serveLogs(ctx context.Context) {
	tokens := append([]string{}, a.cfg.LogTokens...)
	if t := a.cfg.Client.RESTConfig().BearerToken; t != "" {
		tokens = append(tokens, t)
	}
	var metricsHandler http.Handler
	if reg := a.cfg.Metrics.Registry; reg != nil {
		gs := prometheus.Gatherers{reg}
		if a.devices != nil { // the device manager's device_plugin_* metrics too
			gs = append(gs, a.devices.Registry())
		}
		if a.dra != nil { // and the DRA manager's dra_*
			gs = append(gs, a.dra.Registry())
		}
		var g prometheus.Gatherer = gs
		metricsHandler = promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	}
	h := logs.NewHandler(logs.Options{
		RootDir: a.cfg.RootDir, Lookup: a.disp.lookup, Tokens: tokens,
		AllowAnonymous: a.cfg.LogAllowAnonymous, Metrics: metricsHandler, Logger: a.cfg.Logger,
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.cfg.Logger.Error("serve logs", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}()
	go a.renewServingCert(ctx)
	a.cfg.Logger.Info("serving container logs over TLS", "addr", a.listener.Addr().String())
}

// servingCertCheck is how often a running agent checks whether its
// serving certificate is due for renewal.
const servingCertCheck = time.Hour

// renewServingCert renews the log server's certificate before it ends,
// until ctx ends.
func (a *Agent) renewServingCert(ctx context.Context) {
	t := time.NewTicker(servingCertCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
		if err := a.serving.ensure(cctx, a.servingIPs); err != nil {
			a.cfg.Logger.Warn("renew the log server's certificate", "err", err)
		}
		cancel()
	}
}

// withDefaultHooks adds the hooks every agent has: the return gate before
// every other admitter, and CDI devices requested by pod annotations.
func (a *Agent) withDefaultHooks(h pods.Hooks) pods.Hooks {
	h.Admitters = append([]pods.Admitter{a.gate}, h.Admitters...)
	h.Configurers = append([]pods.ContainerConfigurer{pods.CDIAnnotations{}}, h.Configurers...)
	return h
}

// newDeviceManager creates the device manager when DevicePluginDir is set
// and adds it to the hooks: admission (device allocation), container
// options (the plugins' Allocate answers), health (reported, and failing
// pods under the FailPod policy), and the Node's capacity.
func (a *Agent) newDeviceManager() error {
	if a.cfg.DevicePluginDir == "" {
		return nil
	}
	cpDir := a.cfg.DevicePluginDir
	if a.cfg.RootDir != "" {
		cpDir = filepath.Join(a.cfg.RootDir, "device-manager")
	}
	dm, err := devicemanager.New(devicemanager.Options{
		Dir: a.cfg.DevicePluginDir, CheckpointDir: cpDir, GracePeriod: a.cfg.DevicePluginGracePeriod,
		OnChange: a.UpdateNodeStatus, Wake: a.wakePod, Logger: a.cfg.Logger.With("component", "device-manager"),
	})
	if err != nil {
		return fmt.Errorf("create device manager: %w", err)
	}
	a.devices = dm
	h := &a.cfg.Hooks
	h.Admitters = append(h.Admitters, dm)
	h.Configurers = append(h.Configurers, dm)
	a.addHealth(dm, dm)
	a.cfg.NodeDecorators = append(a.cfg.NodeDecorators, dm)
	return nil
}

// newDRAManager creates the DRA manager when PluginsRegistryDir is set and
// adds it to the hooks: admission (claims allocated, reserved and
// prepared) before the device manager's, container options (the claims'
// CDI devices) and the health of the claims' instances. Its checkpoint
// goes to ROOT/dra-manager.
func (a *Agent) newDRAManager() error {
	if a.cfg.PluginsRegistryDir == "" {
		return nil
	}
	cpDir := ""
	if a.cfg.RootDir != "" {
		cpDir = filepath.Join(a.cfg.RootDir, "dra-manager")
	}
	m, err := dra.New(dra.Options{
		NodeName: a.cfg.NodeName, Client: a.cfg.Client, RegistryDir: a.cfg.PluginsRegistryDir, CheckpointDir: cpDir,
		SliceGracePeriod: a.cfg.DRASliceGracePeriod, PrepareTimeout: a.cfg.DRAPrepareTimeout,
		BackoffInitial: a.cfg.DRAPrepareBackoffInitial, BackoffMax: a.cfg.DRAPrepareBackoffMax,
		APITimeout: a.cfg.APITimeout, Wake: a.wakePod, Events: agentEvents{a},
		Logger: a.cfg.Logger.With("component", "dra-manager"),
	})
	if err != nil {
		return fmt.Errorf("create DRA manager: %w", err)
	}
	a.dra = m
	a.cfg.NodeDecorators = append(a.cfg.NodeDecorators, m)
	h := &a.cfg.Hooks
	h.Admitters = append(h.Admitters, m)
	h.Configurers = append(h.Configurers, m)
	a.addHealth(m, m)
	return nil
}

// newSelfFence creates the self-fence unless disabled and adds it to the
// hooks: a Monitor that fails fenced pods while the fence is raised, and
// a configurer that gives their containers the fence. It comes after the
// DRA manager, which says which pods hold multi-node claims.
func (a *Agent) newSelfFence() {
	if a.cfg.SelfFenceAfter <= 0 {
		return
	}
	f := newSelfFence(a.cfg.SelfFenceAfter)
	f.poke = func() {
		if a.disp != nil {
			a.disp.pokeAll()
		}
	}
	f.log = a.cfg.Logger.With("component", "self-fence").Warn
	f.raised, f.stopped = a.cfg.Metrics.Fences, a.cfg.Metrics.FencedPods
	if a.cfg.RootDir != "" {
		f.file = filepath.Join(a.cfg.RootDir, HeartbeatFile)
	}
	if a.dra != nil {
		f.multi = a.dra.HoldsMultiNode
	}
	a.fence = f
	h := &a.cfg.Hooks
	h.Monitors = append(h.Monitors, f)
	h.Configurers = append(h.Configurers, f)
}

// addHealth adds a manager's device health to the hooks: always to the
// pods' status, and as a Monitor that fails the pods holding an
// unhealthy device under the FailPod policy.
func (a *Agent) addHealth(r pods.HealthReporter, m pods.Monitor) {
	h := &a.cfg.Hooks
	h.HealthReporters = append(h.HealthReporters, r)
	if a.cfg.UnhealthyDevicePolicy == UnhealthyDeviceFailPod {
		h.Monitors = append(h.Monitors, m)
	}
}

// wakePod asks the worker of a pod for a sync now. The managers call it
// (after Start, so after prepare set the dispatcher): the DRA manager
// when a claim the pod waits for changed or its back-off ended, both when
// the health of devices the pod holds may have changed.
func (a *Agent) wakePod(uid types.UID) { a.disp.poke(uid) }

// agentEvents records through the agent's recorder, which prepare
// creates after the managers: they record only once started.
type agentEvents struct{ a *Agent }

func (e agentEvents) Eventf(obj k8sruntime.Object, typ, reason, format string, args ...any) {
	if e.a.events != nil {
		e.a.events.Eventf(obj, typ, reason, format, args...)
	}
}
