package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	"allot.dev/allot/pkg/client"
)

// Defaults of Config.
const (
	DefaultWorkers           = 4
	DefaultResync            = 10 * time.Minute
	DefaultMinRetryDelay     = 100 * time.Millisecond
	DefaultMaxRetryDelay     = time.Minute
	DefaultAPITimeout        = 30 * time.Second
	DefaultDriverTimeout     = 30 * time.Second
	DefaultEventFlushTimeout = 5 * time.Second
)

// Config is how a Controller runs. Client and DriverName are required;
// zero values of the other fields take the defaults.
type Config struct {
	// Client talks to the API server, with a token of role
	// `driver DRIVERNAME` (allot token create --role driver --name
	// DRIVERNAME): that role may write the status and finalizers of claims
	// whose class names DRIVERNAME and the status of scheduling contexts
	// of pods using them.
	Client *client.Client
	// DriverName is the driver: the driverName of its classes, of the
	// claims' status and of the resource handles its kubelet plugin
	// receives. A DNS subdomain such as fabric.example.com.
	DriverName string
	// ControllerName is the controllerName of the classes this controller
	// allocates for (default DriverName). A class is the controller's when
	// its driverName is DriverName and its controllerName is
	// ControllerName; claims record both in their status.
	ControllerName string
	// Namespace restricts the controller to claims, pods and scheduling
	// contexts of one namespace ("" for all). Must be empty when Factory
	// is set: give the factory client.WithNamespace instead.
	Namespace string
	// Factory shares informers with the driver (for example a claims
	// lister to derive vendor-side state from allocations). Default: a
	// factory of Client with resync Resync. Run starts it and waits for
	// every informer asked for before Run, the driver's included.
	Factory *client.Factory
	// Workers is how many claims and scheduling contexts are handled at
	// once (default DefaultWorkers).
	Workers int
	// Resync is how often every claim and scheduling context is handled
	// again, which re-checks unsuitable nodes of pending pods (default
	// DefaultResync). Used only for the default Factory.
	Resync time.Duration
	// MinRetryDelay and MaxRetryDelay bound the exponential backoff of a
	// claim or scheduling context whose handling failed (defaults
	// DefaultMinRetryDelay and DefaultMaxRetryDelay).
	MinRetryDelay time.Duration
	MaxRetryDelay time.Duration
	// APITimeout bounds every API call (default DefaultAPITimeout).
	APITimeout time.Duration
	// DriverTimeout bounds every call into the Driver (default
	// DefaultDriverTimeout).
	DriverTimeout time.Duration
	// EventFlushTimeout bounds how long Run writes queued events when it
	// stops (default DefaultEventFlushTimeout).
	EventFlushTimeout time.Duration
	// Host is the source.host of events (default: the host name).
	Host string
	// Logger receives the controller's log (default slog.Default()).
	Logger *slog.Logger
}

// complete validates c and fills the defaults.
func (c Config) complete() (Config, error) {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("client: required"))
	}
	if c.ControllerName == "" {
		c.ControllerName = c.DriverName
	}
	for _, n := range []struct{ field, name string }{{"driverName", c.DriverName}, {"controllerName", c.ControllerName}} {
		field, name := n.field, n.name
		if name == "" {
			errs = append(errs, fmt.Errorf("%s: required", field))
			continue
		}
		if msgs := utilvalidation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: must be a DNS subdomain: %s", field, name, strings.Join(msgs, "; ")))
		}
	}
	if c.ControllerName != "" {
		if msgs := utilvalidation.IsQualifiedName(Finalizer(c.ControllerName)); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("controllerName %q: finalizer %s is not a qualified name: %s",
				c.ControllerName, Finalizer(c.ControllerName), strings.Join(msgs, "; ")))
		}
	}
	if c.Namespace != "" && c.Factory != nil {
		errs = append(errs, errors.New("namespace: must be empty when a factory is given; restrict the factory with client.WithNamespace"))
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers: must not be negative, got %d", c.Workers))
	}
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{
		{"resync", &c.Resync, DefaultResync},
		{"minRetryDelay", &c.MinRetryDelay, DefaultMinRetryDelay},
		{"maxRetryDelay", &c.MaxRetryDelay, DefaultMaxRetryDelay},
		{"apiTimeout", &c.APITimeout, DefaultAPITimeout},
		{"driverTimeout", &c.DriverTimeout, DefaultDriverTimeout},
		{"eventFlushTimeout", &c.EventFlushTimeout, DefaultEventFlushTimeout},
	} {
		switch {
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.field, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if c.MinRetryDelay > c.MaxRetryDelay {
		errs = append(errs, fmt.Errorf("minRetryDelay %s: must not exceed maxRetryDelay %s", c.MinRetryDelay, c.MaxRetryDelay))
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname() // only a label on events
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("driver controller config: %w", err)
	}
	return c, nil
}
