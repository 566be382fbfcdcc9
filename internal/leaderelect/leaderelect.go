// Package leaderelect lets several replicas of a control-plane component
// (the scheduler, the controller manager) run while one works: the
// replicas compete for a coordination.k8s.io/v1 Lease with client-go's
// leader election, the holder runs the component, the others wait and
// take over when the holder stops renewing. Flags and their checks are
// those of kube-scheduler (--leader-elect, --leader-elect-lease-duration,
// --leader-elect-renew-deadline, --leader-elect-retry-period).
//
// Leader election keeps a second replica idle; it does not make two
// leaders impossible (a paused leader may act after its lease expired).
// What keeps devices from being handed out twice is the API server's
// allocation fence on pods/binding, which does not depend on it.
package leaderelect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"allot.dev/allot/pkg/client"
)

// Defaults, as kube-scheduler's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	DefaultNamespace     = "kube-system"
)

// Config is one component's leader election.
type Config struct {
	// Enabled turns leader election on; off, Run runs the component at once.
	Enabled bool
	// LeaseDuration is how long standbys wait after the last renewal
	// before they take the lease; RenewDeadline how long the leader
	// retries a renewal before it gives up leading; RetryPeriod the time
	// between tries. LeaseDuration > RenewDeadline > 1.2 × RetryPeriod,
	// and LeaseDuration is at least a second (a Lease stores whole
	// seconds).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (default HOSTNAME_UUID).
	Identity string
}

// AddFlags adds the leader election flags; name is the Lease's default
// name (the component's).
func AddFlags(f *pflag.FlagSet, c *Config, name string) {
	f.BoolVar(&c.Enabled, "leader-elect", false, "run as one of several replicas: only the holder of the Lease --leader-elect-resource-namespace/--leader-elect-resource-name works, the others wait to take over")
	f.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration, "how long standbys wait after the leader's last renewal before taking over (at least 1s)")
	f.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline, "how long the leader retries renewing before it stops leading (less than the lease duration)")
	f.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", DefaultRetryPeriod, "how long to wait between attempts to acquire or renew (renew deadline / 1.2 at most)")
	f.StringVar(&c.Namespace, "leader-elect-resource-namespace", DefaultNamespace, "namespace of the leader election Lease")
	f.StringVar(&c.Name, "leader-elect-resource-name", name, "name of the leader election Lease")
	f.StringVar(&c.Identity, "leader-elect-identity", "", "this replica's name in the Lease (default HOSTNAME_UUID)")
}

// Validate checks what client-go requires of the timers, naming the flag.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration %s: must be at least 1s (a Lease stores whole seconds)", c.LeaseDuration))
	}
	if c.RenewDeadline <= 0 || c.RetryPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s and --leader-elect-retry-period %s: must be positive", c.RenewDeadline, c.RetryPeriod))
	}
	if c.LeaseDuration <= c.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration %s: must be greater than --leader-elect-renew-deadline %s", c.LeaseDuration, c.RenewDeadline))
	}
	if c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s: must be greater than %.1f × --leader-elect-retry-period %s", c.RenewDeadline, leaderelection.JitterFactor, c.RetryPeriod))
	}
	if c.Namespace == "" || c.Name == "" {
		errs = append(errs, errors.New("--leader-elect-resource-namespace and --leader-elect-resource-name: required"))
	}
	return errors.Join(errs...)
}

// ErrLostLeadership is returned by Run when the lease was lost while the
// component ran: the process should exit, as kube-scheduler does, and be
// restarted as a standby.
var ErrLostLeadership = errors.New("leader election lost")

// Run runs component while this replica holds the lease, or at once when
// leader election is off. It returns when ctx ends (the lease is given
// back, so a standby takes over without waiting for it to expire) or, with
// ErrLostLeadership, when the lease is lost; component's context is
// canceled first and Run waits for it to return.
func Run(ctx context.Context, rc *rest.Config, c Config, log *slog.Logger, reg prometheus.Registerer, component func(context.Context) error) error {
	if !c.Enabled {
		return component(ctx)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	if c.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: %w", err)
		}
		c.Identity = host + "_" + uuid.NewString()
	}
	if reg != nil {
		registerMetrics(reg)
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return fmt.Errorf("leader election client: %w", err)
	}
	ac, err := client.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return fmt.Errorf("leader election client: %w", err)
	}
	host, _ := os.Hostname()
	events := client.NewEventRecorder(ac, c.Name, host)
	defer func() {
		// The last events (a lease given back) get a moment to be written.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		events.Shutdown(sctx)
	}()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity, EventRecorder: leaseEvents{log, events}},
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan struct{})
	compErr := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.LeaseDuration,
		RenewDeadline:   c.RenewDeadline,
		RetryPeriod:     c.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				log.Info("became leader", "lease", c.Namespace+"/"+c.Name, "identity", c.Identity)
				close(started)
				compErr <- component(lctx)
				cancel() // ended on its own: stop renewing, give the lease back
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != c.Identity {
					log.Info("another replica leads", "lease", c.Namespace+"/"+c.Name, "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	log.Info("waiting to lead", "lease", c.Namespace+"/"+c.Name, "identity", c.Identity)
	// Run returns when runCtx ends (after giving the lease back) or when a
	// renewal fails past the deadline; either way the component's context
	// is canceled by then.
	le.Run(runCtx)
	select {
	case <-started:
	default:
		return nil // asked to stop before leading
	}
	err = <-compErr
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return nil
	case runCtx.Err() != nil:
		return fmt.Errorf("%s: the component stopped on its own", c.Name)
	}
	log.Error("lost the lease; exiting", "lease", c.Namespace+"/"+c.Name, "identity", c.Identity)
	return fmt.Errorf("%s/%s: %w", c.Namespace, c.Name, ErrLostLeadership)
}

// leaseEvents records client-go's leader election events ("ID became
// leader", reason LeaderElection) on the Lease, as Kubernetes components
// do, and logs them.
type leaseEvents struct {
	log    *slog.Logger
	events *client.EventRecorder
}

func (r leaseEvents) Eventf(obj runtime.Object, typ, reason, message string, args ...any) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		l = l.DeepCopy()
		l.TypeMeta = metav1.TypeMeta{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease"}
		obj = l
		r.log.Info(fmt.Sprintf(message, args...), "lease", l.Namespace+"/"+l.Name, "reason", reason)
	}
	r.events.Eventf(obj, typ, reason, message, args...)
}
