package deviceplugin

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// deviceFile is the device configuration file (YAML or JSON).
type deviceFile struct {
	// ResourceName is the extended resource, e.g. example.com/gpu.
	ResourceName string `json:"resourceName"`
	// Socket is the plugin's socket name in the plugin directory.
	Socket string `json:"socket"`
	// PreStartRequired asks for PreStartContainer before each start.
	PreStartRequired bool `json:"preStartRequired"`
	// CDIKind, when set (e.g. example.com/gpu), adds the CDI device
	// names KIND=ID to Allocate responses.
	CDIKind string   `json:"cdiKind"`
	Devices []device `json:"devices"`
}

// device is one simulated device.
type device struct {
	ID   string `json:"id"`
	NUMA *int64 `json:"numa,omitempty"`
	// Path is the host device node exposed in the container, e.g.
	// /dev/null; ContainerPath defaults to Path.
	Path          string `json:"path"`
	ContainerPath string `json:"containerPath,omitempty"`
}

// loadDeviceFile reads and checks the device configuration file; the
// socket name defaults and each device's containerPath defaults to its
// path.
func loadDeviceFile(path string) (deviceFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return deviceFile{}, fmt.Errorf("read config: %w", err)
	}
	var c deviceFile
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return deviceFile{}, fmt.Errorf("parse config %s: %w", path, err)
	}
	if c.ResourceName == "" {
		return deviceFile{}, errors.New("config: resourceName is required")
	}
	if c.Socket == "" {
		c.Socket = defaultSocketName
	}
	if strings.ContainsRune(c.Socket, '/') {
		return deviceFile{}, fmt.Errorf("config: socket %q: must be a file name in the plugin directory, not a path", c.Socket)
	}
	seen := map[string]bool{}
	for i, d := range c.Devices {
		if d.ID == "" || seen[d.ID] {
			return deviceFile{}, fmt.Errorf("config: device %d: empty or repeated id %q", i, d.ID)
		}
		seen[d.ID] = true
		if c.Devices[i].ContainerPath == "" {
			c.Devices[i].ContainerPath = d.Path
		}
	}
	return c, nil
}
