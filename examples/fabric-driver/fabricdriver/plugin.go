package fabricdriver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	specs "tags.cncf.io/container-device-interface/specs-go"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/driver/kubeletplugin"
	"allot.dev/allot/pkg/driver/kubeletplugin/cdi"
)

// Defaults of PluginConfig.
const (
	DefaultCDIDir    = "/var/run/cdi"
	DefaultAttachDir = "/var/lib/fabric.example.com/attached"
)

// PluginConfig configures RunPlugin.
type PluginConfig struct {
	// PoolsFile is the pools configuration, the same as the controller's
	// ("" for the built-in one): handles naming a pool or unit it does not
	// have are answered NOT_FOUND.
	PoolsFile string
	// PluginsRegistryDir is the node agent's plugin registration
	// directory. Default v1alpha1.DefaultPluginsRegistryDir.
	PluginsRegistryDir string
	// PluginDir holds the DRA socket. Default
	// v1alpha1.DefaultPluginsDir/fabric.example.com.
	PluginDir string
	// CDIDir is where the claims' CDI specs go. Default DefaultCDIDir.
	CDIDir string
	// AttachDir is where attached units are simulated: a file
	// ATTACH_DIR/CLAIM_UID/UNIT per unit. Default DefaultAttachDir.
	AttachDir string
	// StopGracePeriod is how long calls in flight may finish on shutdown.
	// Default kubeletplugin.DefaultStopGracePeriod.
	StopGracePeriod time.Duration
	// Verbose logs debug messages; used when Logger is nil.
	Verbose bool
	// Logger receives the plugin's log. Default: text on stderr.
	Logger *slog.Logger
}

// AddFlags binds c's fields to flags.
func (c *PluginConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.PoolsFile, "config", "", "YAML `file` with the pools, the controller's (default: the built-in pools)")
	fs.StringVar(&c.PluginsRegistryDir, "plugins-registry-dir", drapb.DefaultPluginsRegistryDir, "the node agent's plugin registration directory")
	fs.StringVar(&c.PluginDir, "plugin-dir", drapb.DefaultPluginsDir+"/"+DriverName, "directory of the driver's DRA socket")
	fs.StringVar(&c.CDIDir, "cdi-dir", DefaultCDIDir, "directory for the CDI specs of prepared claims")
	fs.StringVar(&c.AttachDir, "attach-dir", DefaultAttachDir, "directory where attached units are simulated as files")
	fs.DurationVar(&c.StopGracePeriod, "stop-grace-period", kubeletplugin.DefaultStopGracePeriod, "how long prepare and unprepare calls in flight may finish on shutdown")
	fs.BoolVarP(&c.Verbose, "verbose", "v", false, "log debug messages")
}

// RunPlugin serves the kubelet plugin until ctx ends, then returns nil;
// it returns an error when it cannot start.
func RunPlugin(ctx context.Context, cfg PluginConfig) error {
	pools, err := LoadPools(cfg.PoolsFile)
	if err != nil {
		return fmt.Errorf("%s plugin: %w", DriverName, err)
	}
	if cfg.CDIDir == "" {
		cfg.CDIDir = DefaultCDIDir
	}
	if cfg.AttachDir == "" {
		cfg.AttachDir = DefaultAttachDir
	}
	if cfg.Logger == nil {
		level := slog.LevelInfo
		if cfg.Verbose {
			level = slog.LevelDebug
		}
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	p, err := kubeletplugin.Start(ctx, &nodeDriver{cfg: cfg, pools: pools, log: cfg.Logger}, kubeletplugin.Options{
		DriverName: DriverName, PluginsRegistryDir: cfg.PluginsRegistryDir, PluginDir: cfg.PluginDir, Logger: cfg.Logger,
		StopGracePeriod: cfg.StopGracePeriod,
	})
	if err != nil {
		return err
	}
	defer p.Stop()
	<-ctx.Done()
	return nil
}

// nodeDriver is the node side: it "attaches" a claim's units by creating
// files and hands them to containers through CDI environment variables.
type nodeDriver struct {
	cfg   PluginConfig
	pools *Pools
	log   *slog.Logger
}

var _ kubeletplugin.Driver = &nodeDriver{}

// Enumerate publishes no structured resources: the node agent publishes
// an empty slice for the driver, and claims are allocated by the
// controller.
func (d *nodeDriver) Enumerate(context.Context) (resourcev1alpha2.NodeResourceModel, error) {
	return resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{}}, nil
}

// Prepare attaches the claim's units (a file each, created if missing)
// and writes its CDI spec; both steps are idempotent.
func (d *nodeDriver) Prepare(_ context.Context, c kubeletplugin.Claim) ([]string, error) {
	h, err := DecodeHandle(c.ResourceHandle)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", c.UID, err)
	}
	if err := d.checkUnits(h); err != nil {
		return nil, err
	}
	dir, err := d.attachDir(c.UID)
	if err != nil {
		return nil, err
	}
	if err := d.attach(dir, c, h); err != nil {
		return nil, err
	}
	dev, written, err := cdi.WriteClaimSpec(d.cfg.CDIDir, CDIKind, c.UID, specs.ContainerEdits{Env: []string{
		EnvUnits + "=" + strings.Join(h.Units, ","), EnvPool + "=" + h.Pool, EnvModel + "=" + h.Model,
	}})
	if err != nil {
		return nil, err
	}
	if written {
		d.log.Info("prepared claim", "claim", c.String(), "pool", h.Pool, "units", h.Units, "fallback", h.Fallback, "cdiDevice", dev)
	}
	return []string{dev}, nil
}

// checkUnits checks that the handle's pool and units exist in the
// configuration: a unit that does not exist is ErrNotFound.
func (d *nodeDriver) checkUnits(h Handle) error {
	if h.Fallback {
		return nil
	}
	pool, ok := d.pools.Get(h.Pool)
	if !ok {
		return fmt.Errorf("pool %q is not configured: %w", h.Pool, kubeletplugin.ErrNotFound)
	}
	seen := map[string]bool{}
	for _, u := range h.Units {
		if !pool.HasUnit(u) {
			return fmt.Errorf("unit %q is not a unit of pool %s: %w", u, pool.Name, kubeletplugin.ErrNotFound)
		}
		if seen[u] {
			return fmt.Errorf("resourceHandle: unit %q listed twice", u)
		}
		seen[u] = true
	}
	return nil
}

// attachDir is ATTACH_DIR/UID; a UID that is not a plain file name is
// refused.
func (d *nodeDriver) attachDir(uid types.UID) (string, error) {
	s := string(uid)
	if s == "" || s == "." || s == ".." || filepath.Base(s) != s {
		return "", fmt.Errorf("claim uid %q: not usable as a directory name", uid)
	}
	return filepath.Join(d.cfg.AttachDir, s), nil
}

// attach creates a file per unit in dir, leaving existing ones alone.
func (d *nodeDriver) attach(dir string, c kubeletplugin.Claim, h Handle) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("attach units of claim %s: %w", c.UID, err)
	}
	for _, u := range h.Units {
		path := filepath.Join(dir, u)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		content := fmt.Sprintf("pool=%s\nmodel=%s\nclaim=%s/%s\n", h.Pool, h.Model, c.Namespace, c.Name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("attach unit %s of claim %s: %w", u, c.UID, err)
		}
		d.log.Debug("attached unit", "claim", c.String(), "unit", u)
	}
	return nil
}

// Unprepare removes the CDI spec and detaches the units; a claim that is
// not prepared is a success.
func (d *nodeDriver) Unprepare(_ context.Context, c kubeletplugin.Claim) error {
	removed, err := cdi.RemoveClaimSpec(d.cfg.CDIDir, CDIKind, c.UID)
	if err != nil {
		return err
	}
	dir, err := d.attachDir(c.UID)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(dir)
	attached := statErr == nil
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("detach units of claim %s: %w", c.UID, err)
	}
	if removed || attached {
		d.log.Info("unprepared claim", "claim", c.String())
	}
	return nil
}
