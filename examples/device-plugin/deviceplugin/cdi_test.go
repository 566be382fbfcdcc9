package deviceplugin

import (
	"testing"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// The spec the example writes must resolve with the CDI library the node's
// runtime uses, for every device Allocate names.
func TestWriteCDISpecResolves(t *testing.T) {
	dir := t.TempDir()
	cfg := &deviceFile{CDIKind: "example.com/gpu", Devices: []device{
		{ID: "gpu-0", Path: "/dev/null", ContainerPath: "/dev/gpu0"},
		{ID: "gpu-1", Path: "/dev/null"},
	}}
	if _, err := writeCDISpec(cfg, dir); err != nil {
		t.Fatal(err)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"example.com/gpu=gpu-0", "example.com/gpu=gpu-1"} {
		if cache.GetDevice(name) == nil {
			t.Fatalf("CDI device %s does not resolve; errors: %v", name, cache.GetErrors())
		}
	}
}
