package main

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// config is the plugin's configuration file (YAML or JSON).
type config struct {
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

func loadConfig(path string) (config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return config{}, fmt.Errorf("read config: %w", err)
	}
	var c config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return config{}, fmt.Errorf("parse config %s: %w", path, err)
	}
	if c.ResourceName == "" {
		return config{}, errors.New("config: resourceName is required")
	}
	if c.Socket == "" {
		c.Socket = "example-device-plugin.sock"
	}
	seen := map[string]bool{}
	for i, d := range c.Devices {
		if d.ID == "" || seen[d.ID] {
			return config{}, fmt.Errorf("config: device %d: empty or repeated id %q", i, d.ID)
		}
		seen[d.ID] = true
		if c.Devices[i].ContainerPath == "" {
			c.Devices[i].ContainerPath = d.Path
		}
	}
	return c, nil
}
