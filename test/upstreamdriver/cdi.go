package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"tags.cncf.io/container-device-interface/pkg/parser"
	specs "tags.cncf.io/container-device-interface/specs-go"
)

// cdiVersion is the CDI spec version the driver writes; env edits need
// nothing newer.
const cdiVersion = "0.5.0"

// cdiClass is the CDI class; the kind is <driver>/gpu.
const cdiClass = "gpu"

// specPath is a claim's CDI spec file: <cdi-root>/<driver>-<claimUID>.json.
func specPath(cdiRoot, driver string, claimUID types.UID) string {
	return filepath.Join(cdiRoot, driver+"-"+string(claimUID)+".json")
}

// opaqueParams are the parameters the driver understands in an opaque
// config: extra environment for every device of the requests it names.
type opaqueParams struct {
	Env map[string]string `json:"env"`
}

// claimSpec builds the CDI spec of a claim's devices of this driver and the
// result to return for it. node is the only pool the driver serves. A claim
// with none of this driver's devices gets a nil spec and an empty result.
func claimSpec(driver, node string, inv inventory, claim *resourceapi.ResourceClaim) (*specs.Spec, []kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, nil, errors.New("not allocated")
	}
	alloc := claim.Status.Allocation.Devices
	kind := driver + "/" + cdiClass
	spec := &specs.Spec{Version: cdiVersion, Kind: kind}
	var out []kubeletplugin.Device
	for _, r := range alloc.Results {
		if r.Driver != driver {
			continue
		}
		if r.Pool != node {
			return nil, nil, fmt.Errorf("request %s: device %s/%s is not in this node's pool %q", r.Request, r.Pool, r.Device, node)
		}
		env, ok := inv.deviceEnv(node, r)
		if !ok {
			return nil, nil, fmt.Errorf("request %s: device %q is not one this driver publishes (profile %s)", r.Request, r.Device, inv.profile)
		}
		extra, err := requestEnv(driver, alloc.Config, r.Request)
		if err != nil {
			return nil, nil, fmt.Errorf("request %s: %w", r.Request, err)
		}
		// One CDI device per allocated device, or per share of one: two
		// requests of a claim may hold shares of the same device.
		name := string(claim.UID) + "-" + r.Device
		if r.ShareID != nil {
			name += "-" + string(*r.ShareID)
		}
		if err := parser.ValidateDeviceName(name); err != nil {
			return nil, nil, fmt.Errorf("CDI device name %q: %w", name, err)
		}
		spec.Devices = append(spec.Devices, specs.Device{
			Name:           name,
			ContainerEdits: specs.ContainerEdits{Env: withExtra(env, extra)},
		})
		out = append(out, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{parser.QualifiedName(driver, cdiClass, name)},
			ShareID:      r.ShareID,
		})
	}
	if len(spec.Devices) == 0 {
		return nil, []kubeletplugin.Device{}, nil
	}
	if err := specs.ValidateVersion(spec); err != nil {
		return nil, nil, err
	}
	return spec, out, nil
}

// withExtra is a device's environment (inventory.deviceEnv), then the
// opaque config's variables in key order.
func withExtra(env []string, extra map[string]string) []string {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// requestEnv merges the env of this driver's opaque configs that apply to
// request (in order, so a claim's config overrides its class's). A config
// applies when it names no requests, the request, or its parent request.
func requestEnv(driver string, configs []resourceapi.DeviceAllocationConfiguration, request string) (map[string]string, error) {
	env := map[string]string{}
	parent, _, _ := strings.Cut(request, "/")
	for _, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != driver {
			continue
		}
		if len(c.Requests) > 0 && !slices.Contains(c.Requests, request) && !slices.Contains(c.Requests, parent) {
			continue
		}
		var p opaqueParams
		if len(c.Opaque.Parameters.Raw) > 0 {
			if err := json.Unmarshal(c.Opaque.Parameters.Raw, &p); err != nil {
				return nil, fmt.Errorf("opaque config: %w", err)
			}
		}
		for k, v := range p.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("opaque config: invalid env name %q", k)
			}
			env[k] = v
		}
	}
	return env, nil
}

// writeSpec replaces path with the spec: a temporary file (ignored by CDI
// caches: a leading dot, no .json suffix), fsync, rename, fsync of the
// directory. Rewriting the same claim's spec is harmless.
func writeSpec(path string, spec *specs.Spec) (err error) {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(append(data, '\n')); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeSpec removes a claim's spec file; a missing file is success.
func removeSpec(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
