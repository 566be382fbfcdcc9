package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// holdPoll is how often a held prepare looks for the hold file again.
const holdPoll = 50 * time.Millisecond

// driver implements kubeletplugin.DRAPlugin. It keeps no state across
// calls beyond the files it writes, as the library asks (RollingUpdate may
// send a claim's unprepare to another instance).
type driver struct {
	cfg   config
	log   *slog.Logger
	fatal func(error) // ends the process after a non-recoverable error

	stateMu sync.Mutex // one state-file append at a time
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

// PrepareResourceClaims writes one CDI spec per claim and returns its
// devices. The library has already fetched each claim and checked that it
// is allocated and has the requested UID.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	if err := d.holdPrepare(ctx); err != nil {
		return nil, err
	}
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devs, err := d.prepareClaim(claim)
		if err != nil {
			d.log.Error("prepare failed", "claim", claim.Namespace+"/"+claim.Name, "uid", claim.UID, "err", err)
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		d.log.Info("prepared", "claim", claim.Namespace+"/"+claim.Name, "uid", claim.UID, "devices", len(devs))
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return result, nil
}

func (d *driver) prepareClaim(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	spec, devs, err := claimSpec(d.cfg.driverName, d.cfg.nodeName, d.cfg.inventory(), claim)
	if err != nil {
		return nil, err
	}
	if spec != nil {
		if err := writeSpec(specPath(d.cfg.cdiRoot, d.cfg.driverName, claim.UID), spec); err != nil {
			return nil, fmt.Errorf("write CDI spec: %w", err)
		}
	}
	names := make([]string, 0, len(devs))
	for _, dv := range devs {
		names = append(names, dv.DeviceName)
	}
	if err := d.record("prepare", claim.UID, names...); err != nil {
		return nil, err
	}
	return devs, nil
}

// UnprepareResourceClaims removes each claim's CDI spec; a claim that is
// not prepared (no file) is unprepared successfully.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := removeSpec(specPath(d.cfg.cdiRoot, d.cfg.driverName, claim.UID))
		if err == nil {
			err = d.record("unprepare", claim.UID)
		}
		if err != nil {
			d.log.Error("unprepare failed", "claim", claim.NamespacedName.String(), "uid", claim.UID, "err", err)
		} else {
			d.log.Info("unprepared", "claim", claim.NamespacedName.String(), "uid", claim.UID)
		}
		result[claim.UID] = err
	}
	return result, nil
}

// HandleError logs background errors and ends the process on one the
// library marks as not recoverable.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.log.Error(msg, "err", err)
		return
	}
	d.log.Error(msg+" (fatal)", "err", err)
	d.fatal(fmt.Errorf("%s: %w", msg, err))
}

// holdPrepare is the --prepare-hold-file test hook: while the file exists
// the call waits, so a test can kill the driver or the node agent
// mid-prepare. It gives up when the call is cancelled.
func (d *driver) holdPrepare(ctx context.Context) error {
	path := d.cfg.prepareHoldFile
	if path == "" {
		return nil
	}
	logged := false
	for {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if logged {
				d.log.Info("prepare released", "holdFile", path)
			}
			return nil
		}
		if !logged {
			d.log.Info("prepare held", "holdFile", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prepare held by %s: %w", path, context.Cause(ctx))
		case <-time.After(holdPoll):
		}
	}
}

// record appends "OP UID" to the --state-file and fsyncs it.
func (d *driver) record(op string, uid types.UID, devices ...string) error {
	if d.cfg.stateFile == "" {
		return nil
	}
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if err := appendLine(d.cfg.stateFile, stateLine(op, uid, devices...)); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// stateLine is one line of the state file: "OP UID[ DEVICE,DEVICE...]"
// (the devices a prepare gave the claim).
func stateLine(op string, uid types.UID, devices ...string) string {
	if len(devices) > 0 {
		return op + " " + string(uid) + " " + strings.Join(devices, ",") + "\n"
	}
	return op + " " + string(uid) + "\n"
}

// appendLine appends line to path in one write (O_APPEND, so lines of two
// instances do not interleave) and fsyncs it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
