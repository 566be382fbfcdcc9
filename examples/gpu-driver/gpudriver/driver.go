package gpudriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	specs "tags.cncf.io/container-device-interface/specs-go"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/driver/kubeletplugin"
	"allot.dev/allot/pkg/driver/kubeletplugin/cdi"
)

// driver implements kubeletplugin.Driver for gpu.example.com.
type driver struct {
	cfg   Config
	log   *slog.Logger
	state *stateFile

	mu  sync.RWMutex
	inv *inventory // replaced whole on reload

	failMu   sync.Mutex
	failures map[types.UID]int // prepare calls failed per claim (--fail-prepares)
}

var _ kubeletplugin.Driver = &driver{}

func newDriver(cfg Config, inv *inventory) *driver {
	d := &driver{cfg: cfg, log: cfg.Logger, inv: inv, failures: map[types.UID]int{}}
	if cfg.StateFile != "" {
		d.state = &stateFile{path: cfg.StateFile}
	}
	return d
}

func (d *driver) inventory() *inventory {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.inv
}

func (d *driver) setInventory(inv *inventory) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inv = inv
}

// Enumerate returns the current model.
func (d *driver) Enumerate(context.Context) (resourcev1alpha2.NodeResourceModel, error) {
	return d.inventory().model, nil
}

// Prepare checks the claim's instances, runs the class's initCommand and
// writes the claim's CDI spec; see the package documentation for the
// order.
func (d *driver) Prepare(ctx context.Context, c kubeletplugin.Claim) ([]string, error) {
	if err := d.testKnobs(ctx, c.UID); err != nil {
		return nil, err
	}
	if _, err := cdi.ReadClaimSpec(d.cfg.CDIDir, CDIKind, c.UID); err == nil {
		return d.deviceName(c.UID)
	} else if !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("unreadable CDI spec of a claim; preparing it again", "claim", c.String(), "err", err)
	}
	ids, numbers, err := d.checkInstances(c)
	if err != nil {
		return nil, err
	}
	strategy, err := sharingStrategy(c.Structured.VendorClaimParameters)
	if err != nil {
		return nil, err
	}
	argv, err := initCommand(c.Structured.VendorClassParameters)
	if err != nil {
		return nil, err
	}
	env := []string{
		"GPU_DEVICE_IDS=" + strings.Join(ids, ","),
		"GPU_CLAIM=" + c.Namespace + "/" + c.Name,
	}
	if len(argv) > 0 {
		if err := runInitCommand(ctx, argv, env, d.cfg.InitCommandTimeout); err != nil {
			return nil, err
		}
	}
	edits := specs.ContainerEdits{Env: append(env, "GPU_SHARING_STRATEGY="+strategy)}
	for _, n := range numbers {
		edits.DeviceNodes = append(edits.DeviceNodes, &specs.DeviceNode{Path: "/dev/gpu-example-" + strconv.Itoa(n), HostPath: "/dev/null"})
	}
	dev, _, err := cdi.WriteClaimSpec(d.cfg.CDIDir, CDIKind, c.UID, edits)
	if err != nil {
		return nil, err
	}
	d.log.Info("prepared claim", "claim", c.String(), "instances", ids, "cdiDevice", dev)
	if err := d.state.record("prepare", c, ids...); err != nil {
		d.log.Error("record prepare", "claim", c.String(), "err", err)
	}
	return []string{dev}, nil
}

func (d *driver) deviceName(uid types.UID) ([]string, error) {
	dev, err := cdi.DeviceName(CDIKind, uid)
	if err != nil {
		return nil, err
	}
	return []string{dev}, nil
}

// testKnobs applies --prepare-delay and --fail-prepares.
func (d *driver) testKnobs(ctx context.Context, uid types.UID) error {
	if d.cfg.PrepareDelay > 0 {
		t := time.NewTimer(d.cfg.PrepareDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("prepare delay: %w", ctx.Err())
		}
	}
	if d.cfg.FailPrepares == 0 {
		return nil
	}
	d.failMu.Lock()
	defer d.failMu.Unlock()
	if n := d.failures[uid]; n < d.cfg.FailPrepares {
		d.failures[uid] = n + 1
		return fmt.Errorf("injected failure %d of %d (--fail-prepares)", n+1, d.cfg.FailPrepares)
	}
	return nil
}

// checkInstances returns the claim's instance IDs and their device
// numbers, after checking that each is in the current model (else
// ErrNotFound) and healthy.
func (d *driver) checkInstances(c kubeletplugin.Claim) (ids []string, numbers []int, err error) {
	if c.Structured == nil || c.Structured.Partitionable == nil || len(c.Structured.Partitionable.Instances) == 0 {
		return nil, nil, errors.New("structured_resource_handle: no partitionable instances allocated (" + DriverName + " serves only structured allocations)")
	}
	inv := d.inventory()
	for _, in := range c.Structured.Partitionable.Instances {
		l, ok := inv.leaves[in.ID]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("allocated instance %q is not an allocatable instance of the current model: %w", in.ID, kubeletplugin.ErrNotFound)
		case l.unhealthy:
			return nil, nil, fmt.Errorf("allocated instance %q is unhealthy", in.ID)
		}
		ids = append(ids, in.ID)
		numbers = append(numbers, l.number)
	}
	return ids, numbers, nil
}

// Unprepare removes the claim's CDI spec; a claim without one is done.
func (d *driver) Unprepare(_ context.Context, c kubeletplugin.Claim) error {
	// The state line goes before the removal: a driver killed between the
	// two is asked again, finds nothing to remove, and would otherwise
	// leave the claim counted as prepared (the prepare line, by contrast,
	// follows the spec it counts).
	path, err := cdi.SpecPath(d.cfg.CDIDir, CDIKind, c.UID)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		if err := d.state.record("unprepare", c); err != nil {
			d.log.Error("record unprepare", "claim", c.String(), "err", err)
		}
	}
	removed, err := cdi.RemoveClaimSpec(d.cfg.CDIDir, CDIKind, c.UID)
	if err != nil {
		return err
	}
	if removed {
		d.log.Info("unprepared claim", "claim", c.String())
	}
	return nil
}
