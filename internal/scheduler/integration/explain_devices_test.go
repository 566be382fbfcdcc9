package integration

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/internal/scheduler"
)

// What a driver writes in a v1 claim's status.devices shows in explain:
// the pod's allocated device with its conditions judged (Ready=False is
// failing), its network data and data, in-process and through the CLI.
func TestExplainShowsDeviceStatus(t *testing.T) {
	e := draSetup(t)
	ctx := callCtx(t)
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + draDriver + `"`}}}}}
	must(t, "create device class", func() error { _, err := e.c.DeviceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.DeviceClasses().Delete(c, class.Name, metav1.DeleteOptions{})
	})
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "nic", Namespace: e.ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}
	must(t, "create v1 claim", func() error { _, err := e.c.ResourceClaimsV1(e.ns).Create(ctx, claim); return err })
	e.createPod(claimPod("p", "nic"))
	e.waitBound("p")

	// Before the driver reports anything: unreported.
	reports, err := scheduler.PodDevices(ctx, e.c, e.getPod("p"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].State != scheduler.DeviceUnreported || reports[0].Claim != "nic" {
		t.Fatalf("reports before the driver wrote status: %+v", reports)
	}

	// The driver reports the device not ready, with its network data.
	var got *resourcev1.ResourceClaim
	must(t, "get claim", func() (err error) { got, err = e.c.ResourceClaimsV1(e.ns).Get(ctx, "nic"); return err })
	r := got.Status.Allocation.Devices.Results[0]
	got.Status.Devices = []resourcev1.AllocatedDeviceStatus{{
		Driver: r.Driver, Pool: r.Pool, Device: r.Device,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "LinkDown",
			Message: "no carrier", LastTransitionTime: metav1.Now()}},
		NetworkData: &resourcev1.NetworkDeviceData{InterfaceName: "eth1", IPs: []string{"10.9.0.7/24"}},
		Data:        &runtime.RawExtension{Raw: []byte(`{"firmware": "1.2"}`)},
	}}
	must(t, "write device status", func() error { _, err := e.c.ResourceClaimsV1(e.ns).UpdateStatus(ctx, got); return err })

	reports, err = scheduler.PodDevices(ctx, e.c, e.getPod("p"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := scheduler.WriteDevices(&out, reports); err != nil {
		t.Fatal(err)
	}
	dev := r.Driver + "/" + r.Pool + "/" + r.Device
	want := []string{"CLAIM", "nic", dev, "failing: Ready is False: LinkDown: no carrier", "Ready=False (LinkDown)",
		"interface eth1", "ips 10.9.0.7/24", `data {"firmware":"1.2"}`}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("devices lack %q:\n%s", w, out.String())
		}
	}

	bin := cliBinary(t)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "explain", "pod", "p", "-n", e.ns, "--kubeconfig", cluster.Kubeconfig)
	cmd.Env = cluster.Env()
	cli, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("allot explain: %v\n%s", err, cli)
	}
	for _, w := range append(want, "Devices of the pod's claims") {
		if !strings.Contains(string(cli), w) {
			t.Errorf("allot explain lacks %q:\n%s", w, cli)
		}
	}
}
