package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// The binding-condition controller sets the binding conditions of this
// node's devices of this driver True (or, failing, the failure
// conditions), in the claim's status.devices, and leaves other drivers'
// and other nodes' devices alone. The API server is a fake clientset:
// the far side of the driver's process boundary.
func TestBindingSatisfier(t *testing.T) {
	for _, fail := range []bool{false, true} {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: testDriver, Pool: testNode, Device: "gpu-0",
						BindingConditions: []string{bindingCondition}, BindingFailureConditions: []string{bindingFailureCondition}},
					{Request: "gpu", Driver: testDriver, Pool: "other-node", Device: "gpu-0",
						BindingConditions: []string{bindingCondition}, BindingFailureConditions: []string{bindingFailureCondition}},
					{Request: "gpu", Driver: "other.example.com", Pool: testNode, Device: "x", BindingConditions: []string{"Other"}},
				}}}}}
		client := fake.NewClientset(claim)
		ctx, cancel := context.WithCancel(context.Background())
		b := &bindingSatisfier{client: client, driver: testDriver, node: testNode, delay: 10 * time.Millisecond, fail: fail,
			log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		go b.run(ctx)
		var got *resourceapi.ResourceClaim
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := client.ResourceV1().ResourceClaims("ns").Get(ctx, "c", metav1.GetOptions{})
			got = c
			return err == nil && len(c.Status.Devices) > 0, nil
		})
		cancel()
		if err != nil {
			t.Fatalf("fail=%v: no device status written", fail)
		}
		want := bindingCondition
		if fail {
			want = bindingFailureCondition
		}
		d := got.Status.Devices
		if len(d) != 1 || d[0].Pool != testNode || d[0].Driver != testDriver || len(d[0].Conditions) != 1 ||
			d[0].Conditions[0].Type != want || d[0].Conditions[0].Status != metav1.ConditionTrue {
			t.Errorf("fail=%v: status.devices %+v, want %s True on this node's gpu-0 only", fail, d, want)
		}
	}
}
