package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/cache"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/queue"
	"allot.dev/allot/pkg/client"
)

// binder posts a pod's Binding (client.Client.Bind).
type binder interface {
	Bind(ctx context.Context, ns, pod string, b *corev1.Binding) (string, error)
}

// podStatusWriter patches the status of a pod and reads pods, for the
// PodScheduled condition.
type podStatusWriter interface {
	PatchStatus(ctx context.Context, ns, name string, pt types.PatchType, data []byte) error
	GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error)
}

// eventRecorder is client.EventRecorder's write side.
type eventRecorder interface {
	Eventf(obj runtime.Object, typ, reason, format string, args ...any)
}

// Scheduler places pending pods on nodes: informers feed the cache and
// the queue; one loop pops a pod, runs the framework over a snapshot,
// assumes the pod on the chosen node and hands it to a binding goroutine.
type Scheduler struct {
	cfg     Config
	fw      *framework.Framework
	claimFW *framework.Framework // assigned-pod (claim) cycles: plugins.NewClaimFramework
	exts    extensionSet         // the registry's scheduler extensions
	queue   *queue.Queue
	cache   *cache.Cache
	binder  binder
	claims  claimWriter // nil: no extended resources through DRA (tests)
	status  podStatusWriter
	events  eventRecorder
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time

	factory  *client.Factory
	recorder *client.EventRecorder

	async sync.WaitGroup // binding and failure goroutines
}

// Run builds a Scheduler and runs it until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// New builds a scheduler and registers its informer handlers; Run starts
// it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("build scheduler: no client")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("build scheduler: %w", err)
	}
	if cfg.Identity == "" {
		cfg.Identity, _ = os.Hostname()
	}
	rec := client.NewEventRecorder(cfg.Client, cfg.SchedulerName, cfg.Identity)
	s, err := newScheduler(cfg, cfg.Client, apiStatusWriter{cfg.Client}, rec)
	if err != nil {
		rec.Shutdown(context.Background())
		return nil, err
	}
	s.recorder = rec
	s.claims = apiClaimWriter{cfg.Client}
	s.factory = cfg.Factory
	if s.factory == nil {
		s.factory = client.NewFactory(cfg.Client, 0, client.WithoutManagedFields())
	}
	if err := s.addHandlers(s.factory); err != nil {
		rec.Shutdown(context.Background())
		return nil, err
	}
	if err := s.inform(s.factory); err != nil {
		rec.Shutdown(context.Background())
		return nil, err
	}
	return s, nil
}

// newScheduler builds the core without informers, for New and for tests
// that feed the handlers by hand. cfg must have its defaults.
func newScheduler(cfg Config, b binder, st podStatusWriter, ev eventRecorder) (*Scheduler, error) {
	s := &Scheduler{
		cfg: cfg, cache: cache.New(), binder: b, status: st, events: ev,
		metrics: cfg.Metrics, log: cfg.Logger.With("component", "scheduler"), now: time.Now,
	}
	opts := plugins.Options{
		ScoreStrategy: cfg.ScoreStrategy, Parallelism: cfg.Parallelism, Extra: cfg.ExtraPlugins,
		NodesToFind: framework.NodesToFind(cfg.PercentageOfNodesToScore),
	}
	s.buildExtensions(&opts)
	fw, err := plugins.NewDefaultFramework(opts)
	if err != nil {
		return nil, fmt.Errorf("build scheduler: %w", err)
	}
	claimFW, err := plugins.NewClaimFramework(opts)
	if err != nil {
		return nil, fmt.Errorf("build scheduler: %w", err)
	}
	s.fw, s.claimFW = fw, claimFW
	s.queue = queue.New(queue.Options{
		InitialBackoff: cfg.PodInitialBackoff, MaxBackoff: cfg.PodMaxBackoff,
		UnschedulableTimeout: cfg.UnschedulableTimeout, Events: fw.EventsToRegister(),
		Metrics: s.metrics.setPending, Gate: s.preEnqueue,
	})
	return s, nil
}

// Framework returns the scheduler's framework.
func (s *Scheduler) Framework() *framework.Framework { return s.fw }

// Metrics returns the scheduler's metrics.
func (s *Scheduler) Metrics() *Metrics { return s.metrics }

// Run starts the informers, waits for their caches, and schedules until
// ctx ends. It returns after the binding goroutines have finished.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.shutdownRecorder()
	s.factory.Start(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := s.factory.WaitForCacheSync(syncCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	s.log.Info("scheduler started", "schedulerName", s.cfg.SchedulerName, "plugins", s.fw.PluginNames(),
		"scoreStrategy", s.cfg.ScoreStrategy)
	s.loop(ctx)
	return nil
}

// loop schedules pods one at a time until ctx ends.
func (s *Scheduler) loop(ctx context.Context) {
	qctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.queue.Run(qctx)
	}()
	for s.scheduleOne(ctx) {
	}
	cancel()
	<-done
	s.async.Wait()
}

func (s *Scheduler) shutdownRecorder() {
	if s.recorder == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.APITimeout)
	defer cancel()
	s.recorder.Shutdown(ctx)
}

// goAsync runs fn on its own goroutine, tracked so that Run waits for it.
func (s *Scheduler) goAsync(fn func()) {
	s.async.Add(1)
	go func() {
		defer s.async.Done()
		fn()
	}()
}

// responsible reports whether the pod is pending for this scheduler.
func (s *Scheduler) responsible(pod *corev1.Pod) bool {
	return pod.Spec.SchedulerName == s.cfg.SchedulerName && pod.Spec.NodeName == "" &&
		pod.DeletionTimestamp == nil && !framework.IsTerminal(pod)
}

// needsClaimCycle reports whether a pod given a node by hand needs an
// assigned-pod (claim) cycle: it is this scheduler's, not deleted or
// terminated, and the extension whose cycle concerns it says it needs one
// (for DRA: some claim it uses is not allocated and reserved for it, or
// its ResourceClaimsAllocated condition still says False).
func (s *Scheduler) needsClaimCycle(pod *corev1.Pod) bool {
	if pod.Spec.SchedulerName != s.cfg.SchedulerName || pod.Spec.NodeName == "" ||
		pod.DeletionTimestamp != nil || framework.IsTerminal(pod) {
		return false
	}
	e := s.assignedExtension(pod)
	return e != nil && e.NeedsCycle(pod)
}
