package deviceplugin

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Defaults of Config.
const (
	DefaultConfigFile      = "device-plugin.yaml"
	DefaultDir             = "/var/lib/kubelet/device-plugins"
	DefaultPoll            = time.Second
	DefaultCDIDir          = "/var/run/cdi"
	DefaultRegisterRetry   = time.Second
	DefaultRegisterTimeout = 5 * time.Second
	defaultSocketName      = "example-device-plugin.sock"
	kubeletSocket          = "kubelet.sock"
)

// Config is how Run runs the plugin. The fields set by flags are those of
// AddFlags; zero values of the others take the defaults.
type Config struct {
	// ConfigFile is the device configuration file (YAML or JSON).
	ConfigFile string
	// Dir is the device plugin directory holding kubelet.sock; the
	// plugin's own socket is created there too.
	Dir string
	// Control is a file listing unhealthy device IDs, polled every Poll;
	// empty: no control file.
	Control string
	Poll    time.Duration
	// CDIDir is where the CDI spec of the devices is written when the
	// configuration sets cdiKind.
	CDIDir string

	// RegisterRetry is how long to wait before registering again while
	// kubelet.sock is absent or refuses (default 1s).
	RegisterRetry time.Duration
	// RegisterTimeout bounds one Register call (default 5s).
	RegisterTimeout time.Duration
	// Logger receives the plugin's log (default slog.Default()).
	Logger *slog.Logger
}

// AddFlags adds the plugin's flags to fs, with their defaults written into
// c: -config, -dir, -control, -poll and -cdi-dir. The standalone binary
// uses Go's flag package (so -config and --config both work); cobra
// commands add fs to theirs with pflag's AddGoFlagSet.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ConfigFile, "config", DefaultConfigFile, "device configuration file (YAML or JSON)")
	fs.StringVar(&c.Dir, "dir", DefaultDir, "device plugin directory holding kubelet.sock")
	fs.StringVar(&c.Control, "control", "", "file listing unhealthy device IDs, polled (optional)")
	fs.DurationVar(&c.Poll, "poll", DefaultPoll, "control file poll interval")
	fs.StringVar(&c.CDIDir, "cdi-dir", DefaultCDIDir, "where the CDI spec of the devices is written when cdiKind is set")
}

func (c *Config) defaults() {
	if c.ConfigFile == "" {
		c.ConfigFile = DefaultConfigFile
	}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.Poll == 0 {
		c.Poll = DefaultPoll
	}
	if c.CDIDir == "" {
		c.CDIDir = DefaultCDIDir
	}
	if c.RegisterRetry == 0 {
		c.RegisterRetry = DefaultRegisterRetry
	}
	if c.RegisterTimeout == 0 {
		c.RegisterTimeout = DefaultRegisterTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	switch {
	case c.Poll < 0:
		return fmt.Errorf("poll: must not be negative, got %s", c.Poll)
	case c.RegisterRetry < 0:
		return fmt.Errorf("register retry: must not be negative, got %s", c.RegisterRetry)
	case c.RegisterTimeout < 0:
		return fmt.Errorf("register timeout: must not be negative, got %s", c.RegisterTimeout)
	}
	return nil
}

// Run loads the device configuration, writes the CDI spec when the
// configuration asks for one, and serves and registers the plugin until ctx
// ends; then it removes the CDI spec and returns nil. SIGUSR1 flips every
// device's health while it runs.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	devs, err := loadDeviceFile(cfg.ConfigFile)
	if err != nil {
		return err
	}
	if spec, err := writeCDISpec(&devs, cfg.CDIDir); err != nil {
		return err
	} else if spec != "" {
		log.Info("wrote CDI spec", "path", spec)
		defer os.Remove(spec)
	}
	p := newPlugin(devs, log.With("resource", devs.ResourceName))
	go toggleOnSIGUSR1(ctx, p)
	if cfg.Control != "" {
		go pollControl(ctx, p, cfg.Control, cfg.Poll, log)
	}
	err = serveAndRegister(ctx, p, &cfg)
	if ctx.Err() != nil {
		return nil // stopped: not a failure
	}
	return err
}

func toggleOnSIGUSR1(ctx context.Context, p *plugin) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	for {
		select {
		case <-ch:
			p.toggleAll()
		case <-ctx.Done():
			return
		}
	}
}
