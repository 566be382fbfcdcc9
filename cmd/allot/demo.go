package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/examples/device-plugin/deviceplugin"
	fabricdeploy "allot.dev/allot/examples/fabric-driver/deploy"
	"allot.dev/allot/examples/fabric-driver/fabricdriver"
	"allot.dev/allot/examples/gpu-driver/deploy"
	"allot.dev/allot/examples/gpu-driver/gpudriver"
	"allot.dev/allot/examples/gpu-driver/translator"
	"allot.dev/allot/examples/manifests"
	"allot.dev/allot/internal/cluster"
	"allot.dev/allot/pkg/client"
	drivercontroller "allot.dev/allot/pkg/driver/controller"
)

// The demo pod of examples/manifests/demo.yaml.
const (
	demoNamespace = "demo"
	demoPod       = "demo"
)

// demoDevices is the example device plugin's configuration in the demo:
// two simulated GPUs exposed as /dev/null, with CDI.
const demoDevices = `resourceName: example.com/gpu
socket: example-gpu.sock
cdiKind: example.com/gpu
devices:
- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
- {id: gpu-1, numa: 0, path: /dev/null, containerPath: /dev/gpu1}
`

// demoRackLabel puts the local node in rack r1, whose fabric pool (4
// units in the built-in pools of fabric.example.com) it reaches.
const demoRackLabel, demoRack = "fabric.example.com/rack", "r1"

// configureDemo adds the demo to o: the example device plugin, the example
// structured DRA driver gpu.example.com (with its parameters translator,
// on a driver token) and the example control-plane driver
// fabric.example.com (its controller on a driver token, its kubelet
// plugin) run in-process, with their sockets, CDI specs and attachments
// under DATA-DIR/demo; then the drivers' CRDs and classes and the demo
// workload are applied, and the demo pod's outcome and logs are printed to
// out.
func configureDemo(o *cluster.Options, timeout time.Duration, out io.Writer) error {
	if slicesContain(o.Disable, "node") || slicesContain(o.Disable, "scheduler") || slicesContain(o.Disable, "controller-manager") {
		return errors.New("--demo needs the node, the scheduler and the controller manager: drop --disable")
	}
	dir, err := filepath.Abs(filepath.Join(o.DataDir, "demo"))
	if err != nil {
		return err
	}
	cdiDir := filepath.Join(dir, "cdi")
	for _, d := range []string{cdiDir, filepath.Join(dir, "device-plugins"), filepath.Join(dir, "plugins_registry")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	devices := filepath.Join(dir, "devices.yaml")
	if err := os.WriteFile(devices, []byte(demoDevices), 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	o.Node.DevicePluginDir = filepath.Join(dir, "device-plugins")
	o.Node.PluginsRegistryDir = filepath.Join(dir, "plugins_registry")
	if len(o.CDISpecDirs) == 0 {
		o.CDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}
	}
	o.CDISpecDirs = append(o.CDISpecDirs, cdiDir)
	if o.Node.Labels == nil {
		o.Node.Labels = map[string]string{}
	}
	if _, set := o.Node.Labels[demoRackLabel]; !set {
		o.Node.Labels[demoRackLabel] = demoRack
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o.Extras = append(o.Extras,
		cluster.Extra{Name: "example-device-plugin", Run: func(ctx context.Context, _ *rest.Config) error {
			return deviceplugin.Run(ctx, deviceplugin.Config{ConfigFile: devices, Dir: o.Node.DevicePluginDir, CDIDir: cdiDir,
				Logger: log.With("component", "example-device-plugin")})
		}},
		cluster.Extra{Name: "example-gpu-driver", Run: func(ctx context.Context, _ *rest.Config) error {
			return gpudriver.Run(ctx, gpudriver.Config{CDIDir: cdiDir, PluginsRegistryDir: o.Node.PluginsRegistryDir,
				PluginDir: filepath.Join(dir, "plugins", gpudriver.DriverName), Logger: log.With("component", "example-gpu-driver")})
		}},
		cluster.Extra{Name: "example-gpu-translator", Driver: gpudriver.DriverName, Run: func(ctx context.Context, rc *rest.Config) error {
			c, err := client.NewForConfig(rc)
			if err != nil {
				return err
			}
			return translator.Run(ctx, translator.Config{Client: c, Logger: log.With("component", "example-gpu-translator")})
		}},
		cluster.Extra{Name: "example-fabric-controller", Driver: fabricdriver.DriverName, Run: func(ctx context.Context, rc *rest.Config) error {
			c, err := client.NewForConfig(rc)
			if err != nil {
				return err
			}
			return fabricdriver.RunController(ctx, fabricdriver.ControllerConfig{Controller: drivercontroller.Config{
				Client: c, Logger: log.With("component", "example-fabric-controller")}})
		}},
		cluster.Extra{Name: "example-fabric-plugin", Run: func(ctx context.Context, _ *rest.Config) error {
			return fabricdriver.RunPlugin(ctx, fabricdriver.PluginConfig{PluginsRegistryDir: o.Node.PluginsRegistryDir,
				PluginDir: filepath.Join(dir, "plugins", fabricdriver.DriverName), CDIDir: cdiDir,
				AttachDir: filepath.Join(dir, "fabric-attached"), Logger: log.With("component", "example-fabric-plugin")})
		}},
		cluster.Extra{Name: "demo", Run: func(ctx context.Context, rc *rest.Config) error {
			return runDemo(ctx, rc, timeout, out)
		}},
	)
	return nil
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// demoOut serializes the demo's lines with allot up's own output.
type demoOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (d *demoOut) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "demo: "+format+"\n", args...)
}

// runDemo applies the driver's deploy manifests and the demo workload
// (again, if a previous run left its pod), waits for the pod to end and
// prints how it ended and what its containers printed.
func runDemo(ctx context.Context, rc *rest.Config, timeout time.Duration, w io.Writer) error {
	out := &demoOut{w: w}
	c, err := client.NewForConfig(rc)
	if err != nil {
		return err
	}
	var docs [][]byte
	docs = append(docs, deploy.CRD, deploy.Class, fabricdeploy.CRD, fabricdeploy.Class, manifests.Demo)
	var applied bytes.Buffer
	s := &session{c: c, kinds: newKindMapper(c), out: &applied, errOut: &applied}
	pods := c.Pods(demoNamespace)
	if err := deletePodAndWait(ctx, pods, demoPod, timeout); err != nil {
		out.printf("remove the previous demo pod: %v", err)
		return err
	}
	if err := runApply(ctx, s, []string{"-"}, bytes.NewReader(bytes.Join(docs, []byte("\n---\n")))); err != nil {
		out.printf("apply the demo manifests: %v\n%s", err, applied.String())
		return err
	}
	out.printf("applied the CRDs and classes of gpu.example.com and fabric.example.com and examples/manifests/demo.yaml; waiting for pod %s/%s", demoNamespace, demoPod)

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pod, err := waitPodDone(wctx, pods, demoPod)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		out.printf("pod %s/%s did not finish within %s (%v); see `allot describe pod %s -n %s` and `allot explain pod %s -n %s`",
			demoNamespace, demoPod, timeout, err, demoPod, demoNamespace, demoPod, demoNamespace)
		return nil
	}
	for _, ctr := range pod.Spec.Containers {
		rcl, err := c.Logs(ctx, demoNamespace, demoPod, ctr.Name, false, -1)
		if err != nil {
			out.printf("log of %s: %v", ctr.Name, err)
			continue
		}
		data, err := io.ReadAll(rcl)
		rcl.Close()
		if err != nil {
			out.printf("log of %s: %v", ctr.Name, err)
		}
		for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			out.printf("%s| %s", ctr.Name, line)
		}
	}
	out.printf("pod %s/%s %s%s", demoNamespace, demoPod, pod.Status.Phase, reasonSuffix(pod))
	return nil
}

func reasonSuffix(pod *corev1.Pod) string {
	if pod.Status.Reason == "" {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", pod.Status.Reason, pod.Status.Message)
}

// deletePodAndWait deletes a pod left by an earlier demo and waits until
// it is gone.
func deletePodAndWait(ctx context.Context, pods *client.PodClient, name string, timeout time.Duration) error {
	err := pods.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := pods.Get(ctx, name); apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("pod %s still exists after %s", name, timeout)
}

// waitPodDone polls until the pod has succeeded or failed.
func waitPodDone(ctx context.Context, pods *client.PodClient, name string) (*corev1.Pod, error) {
	for {
		pod, err := pods.Get(ctx, name)
		if err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
			return pod, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("phase %s", pod.Status.Phase)
			}
			return nil, fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
