package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// How often the health file is read, and how often an unchanged report is
// sent again: well inside the kubelet's default 30 s health timeout, after
// which a device's health decays to Unknown.
const (
	healthPoll   = 250 * time.Millisecond
	healthResend = 10 * time.Second
)

// deviceHealth is one line of the health file: DEVICE HEALTH [MESSAGE].
type deviceHealth struct {
	health  kubeletplugin.HealthStatus
	message string
}

// parseHealth reads the health file's lines. Blank lines and lines
// starting with # are skipped; HEALTH is Healthy, Unhealthy or Unknown
// (any case). A later line for a device wins.
func parseHealth(data []byte) (map[string]deviceHealth, error) {
	out := map[string]deviceHealth{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: want DEVICE HEALTH [MESSAGE], got %q", n, line)
		}
		h, ok := healthStatus(fields[1])
		if !ok {
			return nil, fmt.Errorf("line %d: health %q: want Healthy, Unhealthy or Unknown", n, fields[1])
		}
		out[fields[0]] = deviceHealth{health: h, message: strings.Join(fields[2:], " ")}
	}
	return out, sc.Err()
}

func healthStatus(s string) (kubeletplugin.HealthStatus, bool) {
	for _, h := range []kubeletplugin.HealthStatus{kubeletplugin.HealthStatusHealthy, kubeletplugin.HealthStatusUnhealthy, kubeletplugin.HealthStatusUnknown} {
		if strings.EqualFold(s, string(h)) {
			return h, true
		}
	}
	return "", false
}

// readHealth parses the health file; no file (or no flag) means every
// device is healthy.
func readHealth(path string) (map[string]deviceHealth, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseHealth(data)
}

// healthReport covers every device of the node's pool (names, in the
// order published): its line in the file, else Healthy. Lines naming
// other devices are ignored.
func healthReport(node string, names []string, file map[string]deviceHealth, now time.Time) kubeletplugin.DeviceHealthReport {
	report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(names))}
	for _, name := range names {
		h, ok := file[name]
		if !ok {
			h = deviceHealth{health: kubeletplugin.HealthStatusHealthy}
		}
		report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
			PoolName:    node,
			DeviceName:  name,
			Health:      h.health,
			Message:     h.message,
			LastUpdated: now,
		})
	}
	return report
}

// sameHealth compares two reports ignoring their timestamps.
func sameHealth(a, b kubeletplugin.DeviceHealthReport) bool {
	return slices.EqualFunc(a.Devices, b.Devices, func(x, y kubeletplugin.DeviceHealth) bool {
		return x.PoolName == y.PoolName && x.DeviceName == y.DeviceName && x.Health == y.Health && x.Message == y.Message
	})
}

// WatchHealthStatus streams the --health-file: a report of all GPUs at
// once, again on every change, and at least every healthResend. A file
// that does not parse is logged and sends nothing, so the last good
// report stands until it times out.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	var last kubeletplugin.DeviceHealthReport
	var lastSent time.Time
	var lastErr string
	tick := time.NewTicker(healthPoll)
	defer tick.Stop()
	for {
		file, err := readHealth(d.cfg.healthFile)
		switch {
		case err != nil:
			if err.Error() != lastErr {
				d.log.Error("health file", "path", d.cfg.healthFile, "err", err)
				lastErr = err.Error()
			}
		default:
			lastErr = ""
			now := time.Now()
			report := healthReport(d.cfg.nodeName, d.cfg.inventory().deviceNames(d.cfg.nodeName), file, now)
			if lastSent.IsZero() || !sameHealth(report, last) || now.Sub(lastSent) >= healthResend {
				select {
				case <-ctx.Done():
					return nil
				case reports <- report:
				}
				if !lastSent.IsZero() && !sameHealth(report, last) {
					d.log.Info("health changed", "devices", healthSummary(report))
				}
				last, lastSent = report, now
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// healthSummary is "gpu-0=Healthy gpu-1=Unhealthy" for the log.
func healthSummary(r kubeletplugin.DeviceHealthReport) string {
	parts := make([]string, 0, len(r.Devices))
	for _, d := range r.Devices {
		parts = append(parts, d.DeviceName+"="+string(d.Health))
	}
	return strings.Join(parts, " ")
}
