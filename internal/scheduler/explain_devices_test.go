package scheduler

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

func TestClaimDeviceReportsState(t *testing.T) {
	cond := func(typ string, st metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: "R"}
	}
	share := types.UID("7b5c2b7e-2f0e-4a43-9a4f-2d1c0f3e9a11")
	for _, tc := range []struct {
		name     string
		result   resourcev1.DeviceRequestAllocationResult
		status   []resourcev1.AllocatedDeviceStatus
		state    string
		whyHas   string
		condsLen int
	}{
		{name: "nothing reported", state: DeviceUnreported},
		{name: "ready", status: []resourcev1.AllocatedDeviceStatus{{Conditions: []metav1.Condition{cond("Ready", metav1.ConditionTrue)}}},
			state: DeviceReady, condsLen: 1},
		{name: "reported without Ready", status: []resourcev1.AllocatedDeviceStatus{{}}, state: DeviceUnreported, whyHas: "no Ready condition"},
		{name: "not ready", status: []resourcev1.AllocatedDeviceStatus{{Conditions: []metav1.Condition{cond("Ready", metav1.ConditionFalse)}}},
			state: DeviceFailing, whyHas: "Ready is False: R", condsLen: 1},
		{name: "binding pending",
			result: resourcev1.DeviceRequestAllocationResult{BindingConditions: []string{"Attached", "Powered"}},
			status: []resourcev1.AllocatedDeviceStatus{{Conditions: []metav1.Condition{cond("Attached", metav1.ConditionTrue)}}},
			state:  DeviceBinding, whyHas: "waiting for binding condition Powered", condsLen: 1},
		{name: "binding pending, nothing reported",
			result: resourcev1.DeviceRequestAllocationResult{BindingConditions: []string{"Attached"}},
			state:  DeviceBinding, whyHas: "Attached"},
		{name: "binding failed wins over pending",
			result: resourcev1.DeviceRequestAllocationResult{BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"}},
			status: []resourcev1.AllocatedDeviceStatus{{Conditions: []metav1.Condition{cond("AttachFailed", metav1.ConditionTrue)}}},
			state:  DeviceFailing, whyHas: "binding failure condition AttachFailed is True", condsLen: 1},
		{name: "bound", result: resourcev1.DeviceRequestAllocationResult{BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"}},
			status: []resourcev1.AllocatedDeviceStatus{{Conditions: []metav1.Condition{cond("Attached", metav1.ConditionTrue),
				cond("AttachFailed", metav1.ConditionFalse), cond("Ready", metav1.ConditionTrue)}}},
			state: DeviceReady, condsLen: 3},
		{name: "status of another share is not this one's",
			result: resourcev1.DeviceRequestAllocationResult{ShareID: &share},
			status: []resourcev1.AllocatedDeviceStatus{{Conditions: []metav1.Condition{cond("Ready", metav1.ConditionFalse)}}},
			state:  DeviceUnreported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.result
			r.Request, r.Driver, r.Pool, r.Device = "req", "d.example.com", "p", "dev-0"
			for i := range tc.status {
				tc.status[i].Driver, tc.status[i].Pool, tc.status[i].Device = r.Driver, r.Pool, r.Device
			}
			claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Status: resourcev1.ResourceClaimStatus{
				Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{r}}},
				Devices:    tc.status,
			}}
			reps := ClaimDeviceReports(claim)
			if len(reps) != 1 {
				t.Fatalf("%d reports", len(reps))
			}
			got := reps[0]
			if got.State != tc.state || (tc.whyHas != "" && !strings.Contains(got.Why, tc.whyHas)) || len(got.Conditions) != tc.condsLen {
				t.Errorf("got state %q why %q conditions %v; want %q, why with %q, %d conditions", got.State, got.Why, got.Conditions, tc.state, tc.whyHas, tc.condsLen)
			}
		})
	}
}

// A pending pod with a device whose binding condition is not True yet is
// said to wait for it; a bound pod, or one without such devices, is not.
func TestWriteBindingWait(t *testing.T) {
	pending := &corev1.Pod{}
	bound := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}
	binding := []DeviceReport{{Claim: "c", Driver: "d", Pool: "p", Device: "gpu-0", State: DeviceBinding, Why: "waiting for binding condition Attached"}}
	var b strings.Builder
	if err := WriteBindingWait(&b, pending, binding); err != nil {
		t.Fatal(err)
	}
	if want := "waiting for binding conditions of claim c device d/p/gpu-0 (waiting for binding condition Attached)"; !strings.Contains(b.String(), want) {
		t.Fatalf("wrote %q, want %q in it", b.String(), want)
	}
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		reports []DeviceReport
	}{
		"bound":   {bound, binding},
		"ready":   {pending, []DeviceReport{{State: DeviceReady}}},
		"nothing": {pending, nil},
	} {
		b.Reset()
		if err := WriteBindingWait(&b, tc.pod, tc.reports); err != nil || b.Len() != 0 {
			t.Errorf("%s: wrote %q (%v), want nothing", name, b.String(), err)
		}
	}
}
