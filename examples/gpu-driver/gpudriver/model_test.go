package gpudriver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"sigs.k8s.io/yaml"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// TestDefaultModelIsSeed002 pins the built-in model to the slice of the
// seed 002 example manifest.
func TestDefaultModelIsSeed002(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "seed-002.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var slice *resourcev1alpha2.NodeResourceSlice
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "kind: NodeResourceSlice") {
			slice = &resourcev1alpha2.NodeResourceSlice{}
			if err := yaml.UnmarshalStrict([]byte(doc), slice); err != nil {
				t.Fatal(err)
			}
		}
	}
	if slice == nil {
		t.Fatal("no NodeResourceSlice in seed-002.yaml")
	}
	inv, err := loadModel("", PublishSeed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inv.model, slice.Spec.NodeResourceModel) {
		t.Errorf("built-in model differs from the seed's slice")
	}
	var ids []string
	for id := range inv.leaves {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want := []string{
		"gpu-0",
		"partitionable-gpu-1/full-gpu/gpu-1",
		"partitionable-gpu-1/half-and-quarters/first-half",
		"partitionable-gpu-1/half-and-quarters/partitionable-second-half/half/second-half",
		"partitionable-gpu-1/half-and-quarters/partitionable-second-half/quarters/quarter-0",
		"partitionable-gpu-1/half-and-quarters/partitionable-second-half/quarters/quarter-1",
		"partitionable-gpu-1/quarters/quarter-0",
		"partitionable-gpu-1/quarters/quarter-1",
		"partitionable-gpu-1/quarters/quarter-2",
		"partitionable-gpu-1/quarters/quarter-3",
	}
	if !slices.Equal(ids, want) {
		t.Errorf("allocatable IDs\n%q\nwant\n%q", ids, want)
	}
}

func TestModelErrors(t *testing.T) {
	tests := map[string]struct {
		content string
		want    string
	}{
		"typo in a field": {`
partitionable:
  resourceInstances:
  - name: gpu-0
    comonAttributesRefs: [x]`, `unknown field "partitionable.resourceInstances[0].comonAttributesRefs"`},
		"invalid name": {`
partitionable:
  resourceInstances:
  - name: GPU_0`, "partitionable.resourceInstances[0].name"},
		"unknown attribute group": {`
partitionable:
  resourceInstances:
  - name: gpu-0
    commonAttributesRefs: [drivers]`, "partitionable.resourceInstances[0].commonAttributesRefs[0]"},
		"bad health": {`
partitionable:
  resourceInstances:
  - name: gpu-0
    health: Sick`, "partitionable.resourceInstances[0].health"},
		"no model": {"{}", "model: Required value"},
		"a whole slice": {`
apiVersion: resource.k8s.io/v1alpha2
kind: NodeResourceSlice`, `unknown field "apiVersion"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.yaml")
			writeFile(t, path, tc.content)
			_, err := loadModel(path, PublishSeed)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want it to name the file and contain %q", err, tc.want)
			}
		})
	}
	if _, err := loadModel("/does/not/exist.yaml", PublishSeed); err == nil || !strings.Contains(err.Error(), "read model") {
		t.Errorf("missing file: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	tests := map[string]struct {
		change func(*Config)
		want   string
	}{
		"invalid model":         {func(c *Config) { c.ModelFile = "/does/not/exist/model.yaml" }, "model file"},
		"negative fail count":   {func(c *Config) { c.FailPrepares = -1 }, "--fail-prepares -1"},
		"negative delay":        {func(c *Config) { c.PrepareDelay = -1 }, "--prepare-delay"},
		"negative init timeout": {func(c *Config) { c.InitCommandTimeout = -1 }, "--init-timeout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.change(&cfg)
			err := Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// replaceFile writes path as config management does: a new file renamed
// over the old one.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const twoGPUs = `
partitionable:
  commonAttributes:
  - name: t1000
    attributes:
    - {name: memory, quantity: 16Gi}
  resourceInstances:
  - name: gpu-0
    commonAttributesRefs: [t1000]%s
  - name: gpu-1
    commonAttributesRefs: [t1000]
`

// TestReload changes the model file under a running driver: the node
// agent's stream gets each valid model, an invalid one is ignored, and
// prepare follows the current model (unhealthy, then gone).
func TestReload(t *testing.T) {
	cfg := testConfig(t)
	cfg.ModelFile = filepath.Join(t.TempDir(), "gpus.yaml")
	writeFile(t, cfg.ModelFile, strings.Replace(twoGPUs, "%s", "", 1))
	r := start(t, cfg)
	stream, err := r.node.NodeListAndWatchResources(testContext(t), &drapb.NodeListAndWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() resourcev1alpha2.NodeResourceModel {
		t.Helper()
		msg, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var m resourcev1alpha2.NodeResourceModel
		if err := json.Unmarshal(msg.ResourceModel, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := recv(); len(m.Partitionable.ResourceInstances) != 2 {
		t.Fatalf("first model: %+v", m.Partitionable)
	}

	replaceFile(t, cfg.ModelFile, strings.Replace(twoGPUs, "%s", "\n    health: Unhealthy", 1))
	if m := recv(); m.Partitionable.ResourceInstances[0].Health != resourcev1alpha2.InstanceUnhealthy {
		t.Errorf("reloaded model: gpu-0 health %q, want Unhealthy", m.Partitionable.ResourceInstances[0].Health)
	}
	res := r.prepareOne(t, makeClaim("sick", "gpu-0").obj())
	if !strings.Contains(res.Error, `"gpu-0" is unhealthy`) || codes.Code(res.ErrorCode) == codes.NotFound {
		t.Errorf("prepare on an unhealthy instance: %v", res)
	}

	replaceFile(t, cfg.ModelFile, "partitionable: {resourceInstances: [{name: BAD}]}")
	replaceFile(t, cfg.ModelFile, `
partitionable:
  resourceInstances:
  - name: gpu-1
`)
	if m := recv(); len(m.Partitionable.ResourceInstances) != 1 || m.Partitionable.ResourceInstances[0].Name != "gpu-1" {
		t.Errorf("model after an invalid and a valid file: %+v, want only gpu-1", m.Partitionable)
	}
	if res := r.prepareOne(t, makeClaim("gone", "gpu-0").obj()); codes.Code(res.ErrorCode) != codes.NotFound {
		t.Errorf("prepare of a removed instance: %v, want NOT_FOUND", res)
	}
	if res := r.prepareOne(t, makeClaim("fine", "gpu-1").obj()); res.Error != "" {
		t.Errorf("prepare of gpu-1: %s", res.Error)
	}
}

func TestAddFlags(t *testing.T) {
	var cfg Config
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if cfg.CDIDir != DefaultCDIDir || cfg.PluginsRegistryDir != drapb.DefaultPluginsRegistryDir ||
		cfg.PluginDir != drapb.DefaultPluginsDir+"/"+DriverName || cfg.InitCommandTimeout != DefaultInitCommandTimeout {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg.Publish != PublishSeed || cfg.NodeName != "" || cfg.Kubeconfig != "" {
		t.Errorf("defaults: publish %q, node %q, kubeconfig %q; want seed and the rest resolved later", cfg.Publish, cfg.NodeName, cfg.Kubeconfig)
	}
	err := fs.Parse([]string{"--config=m.yaml", "--cdi-dir=/c", "--plugins-registry-dir=/r", "--plugin-dir=/p",
		"--init-timeout=2s", "--fail-prepares=3", "--prepare-delay=1s", "--state-file=/s", "-v",
		"--publish=v1", "--node-name=n1", "--kubeconfig=/k"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{ModelFile: "m.yaml", CDIDir: "/c", PluginsRegistryDir: "/r", PluginDir: "/p",
		InitCommandTimeout: 2e9, FailPrepares: 3, PrepareDelay: 1e9, StateFile: "/s", Verbose: true,
		Publish: PublishV1, NodeName: "n1", Kubeconfig: "/k"}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("parsed %+v\nwant   %+v", cfg, want)
	}
}
