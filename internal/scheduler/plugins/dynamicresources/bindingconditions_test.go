package dynamicresources_test

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
)

// bcClaim is claim c (uid c-1) allocated gpu-0 with binding condition
// Attached and failure condition Failed, reserved for pod p; mutate
// changes it.
func bcClaim(mutate ...func(*resourcev1.ResourceClaim)) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c-1"}}
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-0",
		BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"Failed"}}}}}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p-1"}}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func withCondition(typ string) func(*resourcev1.ResourceClaim) {
	return func(c *resourcev1.ResourceClaim) {
		c.Status.Devices = append(c.Status.Devices, resourcev1.AllocatedDeviceStatus{Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-0",
			Conditions: []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue}}})
	}
}

// BindingVerdict: ready only once every binding condition is True; the
// races end the wait, each with its reason.
func TestBindingVerdict(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p-1"}}
	chosen := bcClaim()
	for name, tc := range map[string]struct {
		cur       *resourcev1.ResourceClaim
		wantReady bool
		wantErr   string
	}{
		"waiting":           {cur: bcClaim()},
		"other condition":   {cur: bcClaim(withCondition("Other"))},
		"ready":             {cur: bcClaim(withCondition("Attached")), wantReady: true},
		"failure condition": {cur: bcClaim(withCondition("Failed")), wantErr: "binding failure condition Failed is True"},
		"deleted":           {cur: nil, wantErr: "claim c was deleted"},
		"replaced":          {cur: bcClaim(func(c *resourcev1.ResourceClaim) { c.UID = "c-2" }), wantErr: "claim c was deleted"},
		"being deleted":     {cur: bcClaim(func(c *resourcev1.ResourceClaim) { c.DeletionTimestamp = &metav1.Time{} }), wantErr: "being deleted"},
		"deallocated":       {cur: bcClaim(func(c *resourcev1.ResourceClaim) { c.Status.Allocation = nil }), wantErr: "deallocated"},
		"other device":      {cur: bcClaim(func(c *resourcev1.ResourceClaim) { c.Status.Allocation.Devices.Results[0].Device = "gpu-1" }), wantErr: "deallocated"},
		"unreserved":        {cur: bcClaim(func(c *resourcev1.ResourceClaim) { c.Status.ReservedFor = nil }), wantErr: "no longer reserved"},
	} {
		t.Run(name, func(t *testing.T) {
			ready, err := dynamicresources.BindingVerdict(pod, chosen, tc.cur, nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			case ready != tc.wantReady:
				t.Fatalf("ready %v, want %v", ready, tc.wantReady)
			}
		})
	}
}

// ReleaseClaim deallocates a claim only the pod uses, with its devices'
// status; with other consumers it only drops the pod.
func TestReleaseClaim(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p-1"}}
	upd, changed := dynamicresources.ReleaseClaim(bcClaim(withCondition("Failed")), bcClaim(), pod)
	if !changed || upd.Status.Allocation != nil || len(upd.Status.Devices) != 0 || len(upd.Status.ReservedFor) != 0 {
		t.Fatalf("sole consumer: changed %v, status %+v", changed, upd.Status)
	}
	shared := bcClaim(func(c *resourcev1.ResourceClaim) {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "q", UID: "q-1"})
	})
	upd, changed = dynamicresources.ReleaseClaim(shared, bcClaim(), pod)
	if !changed || upd.Status.Allocation == nil || len(upd.Status.ReservedFor) != 1 || upd.Status.ReservedFor[0].Name != "q" {
		t.Fatalf("shared: changed %v, status %+v", changed, upd.Status)
	}
	if _, changed = dynamicresources.ReleaseClaim(bcClaim(func(c *resourcev1.ResourceClaim) { c.UID = "c-2" }), bcClaim(), pod); changed {
		t.Fatal("another claim of the same name was changed")
	}
	msg := dynamicresources.BindingWaitMessage([]*resourcev1.ResourceClaim{bcClaim()}, nil)
	if want := "waiting for binding conditions: claim c device gpu.example.com/node-a/gpu-0: Attached"; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
}

// PastCommit: a view at the version the first step replaced lags behind
// it, unless it already shows the allocation reserved for the pod.
func TestPastCommit(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p-1"}}
	at := func(rv string, m ...func(*resourcev1.ResourceClaim)) *resourcev1.ResourceClaim {
		return bcClaim(append(m, func(c *resourcev1.ResourceClaim) { c.ResourceVersion = rv })...)
	}
	chosen := at("5")
	unallocated := func(c *resourcev1.ResourceClaim) { c.Status.Allocation, c.Status.ReservedFor = nil, nil }
	for name, tc := range map[string]struct {
		cur  *resourcev1.ResourceClaim
		want bool
	}{
		"gone":                      {cur: nil, want: true},
		"later version":             {cur: at("6", unallocated), want: true},
		"lagging":                   {cur: at("5", unallocated)},
		"same version, reserved":    {cur: at("5"), want: true},
		"replaced by another claim": {cur: at("5", func(c *resourcev1.ResourceClaim) { c.UID = "c-2" }), want: true},
	} {
		if got := dynamicresources.PastCommit(tc.cur, chosen, pod); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
