package gpudriver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/pkg/driver/kubeletplugin"
)

// Names of the driver.
const (
	// DriverName is the driver's name in slices, classes and claims.
	DriverName = "gpu.example.com"
	// CDIKind is the CDI kind of the devices the driver hands out.
	CDIKind = DriverName + "/gpu"
)

// Defaults of Config.
const (
	DefaultCDIDir             = "/etc/cdi"
	DefaultInitCommandTimeout = 30 * time.Second
)

// The ways the driver publishes its devices (Config.Publish, --publish).
const (
	// PublishSeed serves allot's DRA node API: the node agent publishes
	// the model as the node's NodeResourceSlice (resource.k8s.io/v1alpha2)
	// and hands the driver each claim's allocation. No API credentials.
	PublishSeed = "seed"
	// PublishV1 serves the kubelet's DRA API: the driver publishes the
	// model as resource.k8s.io/v1 ResourceSlices and reads the claims it
	// prepares, with a node-driver token gpu.example.com@NODE. The model
	// must have no partitions; the built-in one is default-model-v1.yaml.
	PublishV1 = "v1"
)

// Config is the driver's configuration; AddFlags binds it to flags, so
// that the standalone binary and `allot example gpu-driver` share them.
type Config struct {
	// ModelFile is a YAML (or JSON) file holding the partitionable model
	// (`partitionable:` as in a NodeResourceSlice's spec); empty means the
	// embedded default model. It is reloaded when it changes.
	ModelFile string
	// CDIDir is where claims' CDI specs are written. Default DefaultCDIDir.
	CDIDir string
	// PluginsRegistryDir is the node agent's plugin registration
	// directory. Default v1alpha1.DefaultPluginsRegistryDir.
	PluginsRegistryDir string
	// PluginDir holds the driver's DRA socket. Default
	// v1alpha1.DefaultPluginsDir/gpu.example.com.
	PluginDir string
	// InitCommandTimeout bounds the class parameters' initCommand.
	// Default DefaultInitCommandTimeout.
	InitCommandTimeout time.Duration

	// Publish is PublishSeed (the default when empty) or PublishV1.
	Publish string
	// NodeName is the node the driver runs on (PublishV1 only). Default
	// $NODE_NAME, else the host name in the form `allot node` names its
	// node by default.
	NodeName string
	// Kubeconfig holds the driver's credentials (PublishV1 only): a
	// node-driver token gpu.example.com@NODE. Default
	// client.DefaultKubeconfigPath ($KUBECONFIG, else the last `allot up`).
	Kubeconfig string
	// KubeClient, when set, is used instead of Kubeconfig (PublishV1
	// only; for Go callers and tests).
	KubeClient kubeletplugin.KubeClient

	// FailPrepares makes the first N prepare calls of each claim fail
	// (a test knob).
	FailPrepares int
	// PrepareDelay is slept at the start of every prepare call (a test
	// knob: time to kill the driver mid-prepare).
	PrepareDelay time.Duration
	// StateFile, when set, gets a line "prepare UID NS/NAME" per claim
	// prepared and "unprepare UID NS/NAME" per claim unprepared; repeated
	// calls add none (a test knob).
	StateFile string

	// Verbose logs debug messages; used when Logger is nil.
	Verbose bool
	// Logger receives the driver's logs. Default: text on stderr.
	Logger *slog.Logger
}

// AddFlags binds c's fields to flags with their defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.ModelFile, "config", "", "YAML `file` with the resource model (the partitionable field of a NodeResourceSlice spec), reloaded on change (default: the built-in model of seed 002)")
	fs.StringVar(&c.CDIDir, "cdi-dir", DefaultCDIDir, "directory for the CDI specs of prepared claims")
	fs.StringVar(&c.PluginsRegistryDir, "plugins-registry-dir", drapb.DefaultPluginsRegistryDir, "the node agent's plugin registration directory")
	fs.StringVar(&c.PluginDir, "plugin-dir", drapb.DefaultPluginsDir+"/"+DriverName, "directory of the driver's DRA socket")
	fs.DurationVar(&c.InitCommandTimeout, "init-timeout", DefaultInitCommandTimeout, "deadline of a class's initCommand")
	fs.StringVar(&c.Publish, "publish", PublishSeed, "how devices are published: seed (allot's node API: the node agent writes the NodeResourceSlice, no credentials) "+
		"or v1 (the kubelet's DRA API: the driver writes resource.k8s.io/v1 ResourceSlices and reads claims itself, with --kubeconfig; models without partitions only)")
	fs.StringVar(&c.NodeName, "node-name", "", "with --publish=v1: the node's name (default $NODE_NAME, else the host name as `allot node` uses it)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "with --publish=v1: kubeconfig with a node-driver token gpu.example.com@NODE (default $KUBECONFIG, else the last `allot up`'s)")
	fs.IntVar(&c.FailPrepares, "fail-prepares", 0, "test knob: the first N prepare calls of each claim fail")
	fs.DurationVar(&c.PrepareDelay, "prepare-delay", 0, "test knob: sleep this long at the start of each prepare call")
	fs.StringVar(&c.StateFile, "state-file", "", "test knob: append a line per claim prepared or unprepared (not per repeated call)")
	fs.BoolVarP(&c.Verbose, "verbose", "v", false, "log debug messages")
}

// complete validates c and fills defaults.
func (c Config) complete() (Config, error) {
	var errs []error
	if c.CDIDir == "" {
		c.CDIDir = DefaultCDIDir
	}
	if c.InitCommandTimeout == 0 {
		c.InitCommandTimeout = DefaultInitCommandTimeout
	}
	if c.InitCommandTimeout < 0 {
		errs = append(errs, fmt.Errorf("--init-timeout %s: must be positive", c.InitCommandTimeout))
	}
	if c.FailPrepares < 0 {
		errs = append(errs, fmt.Errorf("--fail-prepares %d: must not be negative", c.FailPrepares))
	}
	if c.PrepareDelay < 0 {
		errs = append(errs, fmt.Errorf("--prepare-delay %s: must not be negative", c.PrepareDelay))
	}
	switch c.Publish {
	case "":
		c.Publish = PublishSeed
	case PublishSeed:
	case PublishV1:
		if c.NodeName == "" {
			c.NodeName = defaultNodeName(os.Getenv, os.Hostname)
		}
	default:
		errs = append(errs, fmt.Errorf("--publish %q: must be %q or %q", c.Publish, PublishSeed, PublishV1))
	}
	if c.Logger == nil {
		level := slog.LevelInfo
		if c.Verbose {
			level = slog.LevelDebug
		}
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return c, errors.Join(errs...)
}

// defaultNodeName is $NODE_NAME, else the host name lower-cased with the
// characters a node name cannot hold dropped, as `allot node` names its
// node by default.
func defaultNodeName(getenv func(string) string, hostname func() (string, error)) string {
	if n := getenv("NODE_NAME"); n != "" {
		return n
	}
	h, err := hostname()
	if err != nil {
		return "node"
	}
	return corev1.NodeNameFromHost(h)
}
