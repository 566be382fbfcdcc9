package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/pki"
	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/version"
	"allot.dev/allot/pkg/allocator"
)

// Authenticator identifies the user of a request.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (auth.User, bool)
}

// Config configures a Server.
type Config struct {
	Store *storage.Store
	// Authenticator identifies callers; nil serves every request as admin
	// (only for tests and loopback-only development).
	Authenticator Authenticator
	Logger        *slog.Logger
	// MaxRequestBytes bounds request bodies (default 3 MiB).
	MaxRequestBytes int64
	// WatchCacheEvents is the event ring size of each watch cache.
	WatchCacheEvents int
	// MinWatchTimeout is the base of the randomized watch timeout given to
	// watches that set no timeoutSeconds.
	MinWatchTimeout time.Duration
	// NodeTLS issues node agents' serving certificates and reaches the
	// agents over TLS (pods/log); nil reaches no node agent.
	NodeTLS *NodeTLS
	// Metrics are more registries served on /metrics beside the API
	// server's own: those of the components `allot up` runs in the same
	// process. Their metric names must not collide.
	Metrics []prometheus.Gatherer
	// DefaultNotReadyTolerationSeconds and
	// DefaultUnreachableTolerationSeconds are the tolerationSeconds of the
	// NoExecute tolerations of node.kubernetes.io/not-ready and
	// unreachable added to every new pod that has none of its own for them
	// (Kubernetes' DefaultTolerationSeconds admission): how long its pods
	// stay on a node that stopped heartbeating. 0 means 300; negative adds
	// none.
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
}

// DefaultTolerationSeconds is Kubernetes' default for both.
const DefaultTolerationSeconds = 300

// Server is the allot API server.
type Server struct {
	cfg     Config
	store   *storage.Store
	log     *slog.Logger
	reg     *registry
	metrics *metrics

	mu           sync.RWMutex
	cacheStartMu sync.Mutex                 // serializes creating watch caches
	caches       map[string]*storage.Cacher // by etcd prefix
	ctx          context.Context
	started      chan struct{}
	ready        bool
}

// New creates a server over the store. Call Start before serving.
func New(cfg Config) *Server {
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 3 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MinWatchTimeout == 0 {
		cfg.MinWatchTimeout = 30 * time.Minute
	}
	if cfg.WatchCacheEvents == 0 {
		cfg.WatchCacheEvents = 10000
	}
	s := &Server{
		cfg: cfg, store: cfg.Store, log: cfg.Logger, reg: newRegistry(),
		metrics: newMetrics(cfg.Metrics), caches: map[string]*storage.Cacher{},
		started: make(chan struct{}),
	}
	validation.SetSelectorCompiler(allocator.CompileSelector)
	validation.SetDeviceSelectorCompiler(allocator.CompileDeviceSelector)
	for _, k := range builtinKinds() {
		if k.gvk.Group == "" && k.resource == "pods" {
			// On create and update, as Kubernetes' admission plugin: a
			// replace without them gets them back, as stored.
			prep, prepUpd := k.prepareCreate, k.prepareUpdate
			k.prepareCreate = func(obj runtime.Object) {
				prep(obj)
				addDefaultTolerations(obj.(*corev1.Pod), cfg.DefaultNotReadyTolerationSeconds, cfg.DefaultUnreachableTolerationSeconds)
			}
			k.prepareUpdate = func(obj, old runtime.Object) {
				prepUpd(obj, old)
				addDefaultTolerations(obj.(*corev1.Pod), cfg.DefaultNotReadyTolerationSeconds, cfg.DefaultUnreachableTolerationSeconds)
			}
		}
		s.reg.add(k)
	}
	return s
}

// addDefaultTolerations adds the node-loss tolerations a pod does not
// have (DefaultTolerationSeconds admission).
func addDefaultTolerations(p *corev1.Pod, notReady, unreachable int64) {
	for _, d := range []struct {
		key  string
		secs int64
	}{{corev1.TaintNodeNotReady, notReady}, {corev1.TaintNodeUnreachable, unreachable}} {
		if d.secs < 0 {
			continue
		}
		if d.secs == 0 {
			d.secs = DefaultTolerationSeconds
		}
		taint := corev1.Taint{Key: d.key, Effect: corev1.TaintEffectNoExecute}
		if slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(taint) }) {
			continue
		}
		secs := d.secs
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: d.key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
	}
}

// Start fills the watch caches of every kind and starts following CRDs. It
// returns once the caches are ready.
func (s *Server) Start(ctx context.Context) error {
	s.ctx = ctx
	// The built-in kinds' type converter (the field manager's schemas,
	// 50 ms of CPU) is built in the background at start, as
	// kube-apiserver builds its own when it installs its APIs, so that
	// the first writes do not wait for it; once per process.
	go builtinTypeConverter() //nolint:errcheck // the first write reports its error
	for _, k := range s.reg.all() {
		if err := s.startCache(ctx, k); err != nil {
			return err
		}
	}
	if err := s.loadCRDs(ctx); err != nil {
		return err
	}
	go s.followCRDs(ctx)
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	close(s.started)
	return nil
}

func (s *Server) startCache(ctx context.Context, k *kind) error {
	s.cacheStartMu.Lock()
	defer s.cacheStartMu.Unlock()
	s.mu.RLock()
	_, have := s.caches[k.prefix()]
	s.mu.RUnlock()
	if have {
		return nil
	}
	c := storage.NewCacher(s.store, k.prefix(), s.decoderFor(k), storage.CacherOptions{EventBuffer: s.cfg.WatchCacheEvents, Logger: s.log, BookmarkInterval: time.Minute})
	// The cache lives as long as the server, whatever request started it.
	if err := c.Start(s.ctx); err != nil {
		return fmt.Errorf("start watch cache of %s: %w", k.resource, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		return fmt.Errorf("fill watch cache of %s: %w", k.resource, err)
	}
	s.mu.Lock()
	s.caches[k.prefix()] = c
	s.mu.Unlock()
	return nil
}

func (s *Server) cacheFor(k *kind) (*storage.Cacher, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := s.caches[k.prefix()]
	if c == nil {
		return nil, apierrors.NewServiceUnavailable("the watch cache of " + k.resource + " is not ready")
	}
	return c, nil
}

// Handler returns the HTTP handler with authentication, limits and metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.serveHealth)
	mux.HandleFunc("/livez", s.serveHealth)
	mux.HandleFunc("/readyz", s.serveReady)
	mux.HandleFunc("/version", s.serveVersion)
	mux.Handle("/metrics", s.metrics.handler())
	mux.HandleFunc("/openapi/", s.serveOpenAPI)
	mux.HandleFunc("/api", s.serveAPI)
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/apis", s.serveAPI)
	mux.HandleFunc("/apis/", s.serveAPI)
	mux.HandleFunc("POST "+pki.NodeCertificatePath("{node}"), s.serveNodeCertificate)
	return s.withAuth(s.metrics.instrument(mux))
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.store.CurrentRevision(ctx); err != nil {
		http.Error(w, "etcd: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	ready := s.ready
	s.mu.RUnlock()
	if !ready {
		http.Error(w, "watch caches are filling", http.StatusServiceUnavailable)
		return
	}
	s.serveHealth(w, r)
}

// Version is allot's version (internal/version), which the OpenAPI
// documents give as their info.version.
var Version = version.Version()

// serveVersion answers /version with internal/version's Info: major and
// minor are the Kubernetes API level allot serves, gitVersion that level
// followed by allot's version (see version.GitVersion for why).
func (s *Server) serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, version.Get())
}

// EnsureNamespaces creates the named namespaces if they do not exist.
func (s *Server) EnsureNamespaces(ctx context.Context, names ...string) error {
	k := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "namespaces"))
	for _, n := range names {
		// An existing one is not written again: `allot up` restarts on a
		// full disk (writes answered 507) and serves what it has.
		if _, err := s.getObj(ctx, k, "", n); err == nil {
			continue
		}
		ns := &corev1.Namespace{}
		ns.Name = n
		ri := &requestInfo{verb: "create", resource: "namespaces", manager: "allot-apiserver"}
		actx := context.WithValue(ctx, userKey{}, auth.User{Name: "system", Role: auth.RoleAdmin})
		if _, err := s.create(actx, k, ri, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", n, err)
		}
	}
	return nil
}
