package client_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
)

// Claims of both resource.k8s.io versions are one set; each version's
// informer holds the claims written in it and leaves the other's views
// out, while a plain Get or List shows every claim.
func TestClaimInformersOfBothVersions(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	seed := &resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "seed"}, Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"}}
	if _, err := c.ResourceClaims(ns).Create(ctx, seed); err != nil {
		t.Fatal(err)
	}
	v1 := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "v1"}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}
	created, err := c.ResourceClaimsV1(ns).Create(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Devices.Requests[0].Exactly.Count != 1 {
		t.Errorf("v1 claim not defaulted: %+v", created.Spec.Devices.Requests[0].Exactly)
	}
	all, err := c.ResourceClaimsV1(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(all.Items) != 2 {
		t.Fatalf("v1 list: %v, %v; want both claims", all, err)
	}

	f := client.NewFactory(c, 0)
	old, cur := f.ResourceClaims(), f.ResourceClaimsV1()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	f.Start(runCtx)
	if !cache.WaitForCacheSync(ctx.Done(), old.HasSynced, cur.HasSynced) {
		t.Fatal("informers did not sync")
	}
	names := func(objs []string) string { slices.Sort(objs); return strings.Join(objs, ",") }
	var got []string
	for _, o := range old.GetStore().List() {
		if c := o.(*resourcev1alpha2.ResourceClaim); c.Namespace == ns { // other tests' claims are elsewhere
			got = append(got, c.Name)
		}
	}
	if names(got) != "seed" {
		t.Errorf("v1alpha2 informer holds %v, want only seed", got)
	}
	got = nil
	for _, o := range cur.GetStore().List() {
		if c := o.(*resourcev1.ResourceClaim); c.Namespace == ns {
			got = append(got, c.Name)
		}
	}
	if names(got) != "v1" {
		t.Errorf("v1 informer holds %v, want only v1", got)
	}
	// A new view never reaches the other informer.
	if _, err := c.ResourceClaims(ns).Create(ctx, &resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "seed2"},
		Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "seed2 in the v1alpha2 informer", func() bool {
		_, ok, _ := old.GetStore().GetByKey(ns + "/seed2")
		return ok
	})
	if _, ok, _ := cur.GetStore().GetByKey(ns + "/seed2"); ok {
		t.Error("the v1 informer holds a view of a v1alpha2 claim")
	}
}
