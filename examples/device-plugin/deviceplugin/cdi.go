package deviceplugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cdiSpec is the subset of a CDI spec file (cdiVersion 0.6.0) the example
// writes: one CDI device per simulated device, exposing its device node
// and naming it in an env var.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []cdiDeviceNode `json:"deviceNodes,omitempty"`
}

type cdiDeviceNode struct {
	Path     string `json:"path"`
	HostPath string `json:"hostPath,omitempty"`
}

// writeCDISpec writes DIR/VENDOR-CLASS.json for the configured devices, so
// that the CDI names Allocate returns resolve on the node. It returns the
// file's path.
func writeCDISpec(cfg *deviceFile, dir string) (string, error) {
	if cfg.CDIKind == "" {
		return "", nil
	}
	spec := cdiSpec{Version: "0.6.0", Kind: cfg.CDIKind}
	for _, d := range cfg.Devices {
		cp := d.ContainerPath
		if cp == "" {
			cp = d.Path
		}
		spec.Devices = append(spec.Devices, cdiDevice{Name: d.ID, Edits: cdiEdits{
			Env:         []string{"EXAMPLE_CDI_DEVICE_" + envSafe(d.ID) + "=" + d.ID},
			DeviceNodes: []cdiDeviceNode{{Path: cp, HostPath: d.Path}},
		}})
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode CDI spec: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create CDI dir: %w", err)
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "-", ".", "_").Replace(cfg.CDIKind)+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	return path, nil
}

func envSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}
