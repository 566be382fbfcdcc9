package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/pkg/client"
)

// BenchmarkPodStartWithDevices measures, on one node agent (fake runtime)
// with the example device plugin registered, the time from creating a pod
// bound to the node to seeing it Running, for pods with one device from the
// plugin and for plain pods. The difference is the device manager's
// admission: device choice, the plugin's Allocate and PreStartContainer
// over gRPC, and the checkpoint write.
func BenchmarkPodStartWithDevices(b *testing.B) {
	e := newEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := e.newClient(b)
	dir := b.TempDir()
	pluginDir := filepath.Join(dir, "device-plugins")
	startDeviceNode(ctx, b, c, dir, pluginDir)
	startExamplePlugin(b, dir, pluginDir, 8)
	waitAllocatable(ctx, b, c, "8")

	var plain, devices []time.Duration
	for i := 0; i < b.N*8; i++ {
		plain = append(plain, startPod(ctx, b, c, fmt.Sprintf("plain-%d", i), false))
		devices = append(devices, startPod(ctx, b, c, fmt.Sprintf("gpu-%d", i), true))
		if (i+1)%8 == 0 { // free the devices for the next round
			for j := i - 7; j <= i; j++ {
				_ = c.Pods("default").Delete(ctx, fmt.Sprintf("gpu-%d", j), metav1.DeleteOptions{})
			}
			waitAllocatableFree(ctx, b, c)
		}
	}
	b.ReportMetric(ms(percentile(plain, 0.5)), "plain-p50-ms")
	b.ReportMetric(ms(percentile(devices, 0.5)), "devices-p50-ms")
	b.ReportMetric(ms(percentile(plain, 0.99)), "plain-p99-ms")
	b.ReportMetric(ms(percentile(devices, 0.99)), "devices-p99-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func startDeviceNode(ctx context.Context, b *testing.B, c *client.Client, dir, pluginDir string) {
	rt, err := fake.New(fake.Options{})
	if err != nil {
		b.Fatal(err)
	}
	a, err := node.New(node.Config{NodeName: "dev-node", Client: c, Runtime: rt, RootDir: filepath.Join(dir, "node"),
		DevicePluginDir: pluginDir, HeartbeatInterval: 200 * time.Millisecond, RelistInterval: 50 * time.Millisecond,
		Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = a.Run(ctx) }()
}

func startExamplePlugin(b *testing.B, dir, pluginDir string, n int) {
	bin := filepath.Join(dir, "example-device-plugin")
	build := exec.Command("go", "build", "-o", bin, "../examples/device-plugin")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build example device plugin: %v\n%s", err, out)
	}
	cfg := "resourceName: example.com/gpu\nsocket: bench-gpu.sock\npreStartRequired: true\ndevices:\n"
	for i := 0; i < n; i++ {
		cfg += fmt.Sprintf("- {id: gpu-%d, numa: %d, path: /dev/null}\n", i, i%2)
	}
	cfgPath := filepath.Join(dir, "devices.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100; i++ { // the agent creates kubelet.sock when it starts
		if _, err := os.Stat(filepath.Join(pluginDir, "kubelet.sock")); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd := exec.Command(bin, "-config", cfgPath, "-dir", pluginDir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func waitAllocatable(ctx context.Context, b *testing.B, c *client.Client, want string) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		n, err := c.Nodes().Get(ctx, "dev-node")
		if err == nil {
			if q, ok := n.Status.Allocatable["example.com/gpu"]; ok && q.String() == want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("node never had %s allocatable devices", want)
}

// waitAllocatableFree waits until no pod holds devices (the gpu pods are
// gone).
func waitAllocatableFree(ctx context.Context, b *testing.B, c *client.Client) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=dev-node"})
		busy := 0
		if err == nil {
			for _, p := range list.Items {
				if len(p.Spec.Containers[0].Resources.Limits) > 0 {
					busy++
				}
			}
		}
		if err == nil && busy == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("device pods were not deleted")
}

// startPod creates a pod bound to dev-node and returns the time until it
// is Running.
func startPod(ctx context.Context, b *testing.B, c *client.Client, name string, withDevice bool) time.Duration {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		NodeName: "dev-node", TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
	}}
	if withDevice {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
	}
	start := time.Now()
	if _, err := c.Pods("default").Create(ctx, p); err != nil {
		b.Fatal(err)
	}
	for time.Since(start) < time.Minute {
		got, err := c.Pods("default").Get(ctx, name)
		if err == nil && got.Status.Phase == corev1.PodRunning {
			return time.Since(start)
		}
		if err == nil && got.Status.Phase == corev1.PodFailed {
			b.Fatalf("pod %s failed: %s", name, got.Status.Message)
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("pod %s not Running within a minute", name)
	return 0
}
