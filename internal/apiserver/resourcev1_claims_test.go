package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// v1Claim is a claim of one GPU from class gpu.example.com with a CEL
// selector and opaque config, as the upstream example driver's demos
// write them.
func v1Claim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "gpu.example.com",
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
					Expression: `device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"`}}},
			}}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com",
					Parameters: runtimeRaw(`{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`)}}}},
		}},
	}
}

func runtimeRaw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func path1(ns, resource string) string {
	return "/apis/resource.k8s.io/v1/namespaces/" + ns + "/" + resource
}

func path2(ns, resource string) string {
	return "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/" + resource
}

// Claims of both versions live in one set: each version lists all, a
// claim read through its own version comes back as written (plus defaults
// and status), and through the other version as a view.
func TestClaimsOfBothVersionsAreOneSet(t *testing.T) {
	ns := newNamespace(t)
	in := v1Claim("v1-gpu")
	r := admin(t, "POST", path1(ns, "resourceclaims"), in)
	expect(t, r, 201)
	var created resourcev1.ResourceClaim
	r.into(t, &created)
	if created.Spec.Devices.Requests[0].Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount ||
		created.Spec.Devices.Requests[0].Exactly.Count != 1 {
		t.Fatalf("v1 claim not defaulted: %+v", created.Spec.Devices.Requests[0].Exactly)
	}
	old := makeClaim("old-gpu", "gpu")
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), old), 201)

	for _, p := range []string{path1(ns, "resourceclaims"), path2(ns, "resourceclaims")} {
		var list struct {
			APIVersion string `json:"apiVersion"`
			Items      []struct {
				APIVersion string            `json:"apiVersion"`
				Metadata   metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		r := admin(t, "GET", p, nil)
		expect(t, r, 200)
		r.into(t, &list)
		var got []string
		for _, it := range list.Items {
			if it.APIVersion != list.APIVersion {
				t.Errorf("%s: item %s has apiVersion %s in a %s list", p, it.Metadata.Name, it.APIVersion, list.APIVersion)
			}
			got = append(got, it.Metadata.Name+"="+it.Metadata.Annotations[resourcev1alpha2.StoredVersionAnnotation])
		}
		want := "old-gpu=,v1-gpu=resource.k8s.io/v1"
		if strings.HasPrefix(p, "/apis/resource.k8s.io/v1/") {
			want = "old-gpu=resource.k8s.io/v1alpha2,v1-gpu="
		}
		if strings.Join(got, ",") != want {
			t.Errorf("list %s = %v, want %s", p, got, want)
		}
	}

	// Read back through the version written: as written plus defaults.
	var back resourcev1.ResourceClaim
	r = admin(t, "GET", path1(ns, "resourceclaims")+"/v1-gpu", nil)
	expect(t, r, 200)
	r.into(t, &back)
	if !apiequality.Semantic.DeepEqual(back.Spec, created.Spec) || back.Labels["app"] != "demo" || len(back.Annotations) != 0 {
		t.Fatalf("v1 claim read back differs:\n%+v\nwant\n%+v", back, created)
	}
	// Through the other version: a view with metadata and no spec.
	var view resourcev1alpha2.ResourceClaim
	r = admin(t, "GET", path2(ns, "resourceclaims")+"/v1-gpu", nil)
	expect(t, r, 200)
	r.into(t, &view)
	if view.APIVersion != "resource.k8s.io/v1alpha2" || view.Spec.ResourceClassName != "" || view.Labels["app"] != "demo" ||
		view.Annotations[resourcev1alpha2.StoredVersionAnnotation] != "resource.k8s.io/v1" || view.UID != back.UID {
		t.Fatalf("v1alpha2 view of the v1 claim: %+v", view)
	}
	// Informers select the claims stored in their version by the field
	// resource.allot.dev/stored-version: the others are never converted.
	r = admin(t, "GET", path2(ns, "resourceclaims")+"?fieldSelector=resource.allot.dev%2Fstored-version%3Dresource.k8s.io%2Fv1", nil)
	expect(t, r, 200, `"v1-gpu"`)
	if strings.Contains(string(r.body), `"old-gpu"`) {
		t.Fatalf("stored-version=v1 selected the v1alpha2 claim: %s", r.body)
	}
	// The field selector of v1alpha2 clients still selects v1alpha2 claims.
	r = admin(t, "GET", path2(ns, "resourceclaims")+"?fieldSelector=spec.resourceClassName%3Dgpu", nil)
	expect(t, r, 200, `"old-gpu"`)
	if strings.Contains(string(r.body), `"v1-gpu"`) {
		t.Fatalf("field selector spec.resourceClassName=gpu selected the v1 claim: %s", r.body)
	}
}

// A write through a view may change metadata, which lands on the stored
// object; any other change is refused with 422 naming the field, and the
// stored object is unchanged.
func TestClaimWritesThroughTheOtherVersion(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("c1")), 201)
	p2 := path2(ns, "resourceclaims") + "/c1"

	r := admin(t, "PATCH", p2, `{"status":{"driverName":"x"}}`, "Content-Type", "application/merge-patch+json")
	expect(t, r, 200) // status is ignored by main-resource writes, as always
	r = admin(t, "PATCH", p2, `{"metadata":{"labels":{"team":"a"}}}`, "Content-Type", "application/merge-patch+json")
	expect(t, r, 200, `"team":"a"`, `"apiVersion":"resource.k8s.io/v1alpha2"`)
	var back resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/c1", nil).into(t, &back)
	if back.Labels["team"] != "a" || len(back.Spec.Devices.Requests) != 1 || back.Spec.Devices.Config[0].Opaque == nil ||
		back.Annotations[resourcev1alpha2.StoredVersionAnnotation] != "" {
		t.Fatalf("after a metadata write through v1alpha2 the v1 claim is %+v", back)
	}

	var view resourcev1alpha2.ResourceClaim
	admin(t, "GET", p2, nil).into(t, &view)
	view.Spec.ResourceClassName = "gpu"
	r = admin(t, "PUT", p2, &view)
	expect(t, r, 422, "spec.resourceClassName", "stored as resource.k8s.io/v1")
	r = admin(t, "PATCH", p2+"/status", `{"status":{"driverName":"gpu.example.com"}}`, "Content-Type", "application/merge-patch+json")
	expect(t, r, 422, "status.driverName")
	var after resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/c1", nil).into(t, &after)
	if !apiequality.Semantic.DeepEqual(after.Spec, back.Spec) || after.Status.Allocation != nil || after.ResourceVersion != back.ResourceVersion {
		t.Fatalf("a refused write changed the stored claim: %+v", after)
	}

	// Deletion through the other version keeps the stored version until the
	// finalizer goes.
	r = admin(t, "PATCH", p2, `{"metadata":{"finalizers":["example.com/hold"]}}`, "Content-Type", "application/merge-patch+json")
	expect(t, r, 200)
	expect(t, admin(t, "DELETE", p2, nil), 202)
	admin(t, "GET", path1(ns, "resourceclaims")+"/c1", nil).into(t, &after)
	if after.DeletionTimestamp == nil || len(after.Spec.Devices.Requests) != 1 {
		t.Fatalf("claim deleted through v1alpha2: %+v", after)
	}
	r = admin(t, "PATCH", path1(ns, "resourceclaims")+"/c1", `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json")
	expect(t, r, 200)
	expect(t, admin(t, "GET", p2, nil), 404)
}

// A watch through v1 sees claims created through v1alpha2, as views.
func TestClaimWatchAcrossVersions(t *testing.T) {
	ns := newNamespace(t)
	c := v1Client(t, "admin", false).ResourceClaims(ns)
	w, err := c.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("seed", "gpu")), 201)
	select {
	case ev := <-w.ResultChan():
		got, ok := ev.Object.(*resourcev1.ResourceClaim)
		if ev.Type != watch.Added || !ok || got.Name != "seed" || got.Annotations[resourcev1alpha2.StoredVersionAnnotation] != "resource.k8s.io/v1alpha2" {
			t.Fatalf("event %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for a claim created through v1alpha2")
	}
}

// The v1alpha2 view of an allocated v1alpha2 claim shows its devices in
// v1 terms: pool = node, device = instance ID with "/" as "--".
func TestClaimViewShowsAllocatedDevices(t *testing.T) {
	ns := newNamespace(t)
	c := makeClaim("alloc", "gpu")
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), c), 201)
	var stored resourcev1alpha2.ResourceClaim
	admin(t, "GET", path2(ns, "resourceclaims")+"/alloc", nil).into(t, &stored)
	stored.Status.DriverName = "gpu.example.com"
	stored.Status.Allocation = &resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{
		DriverName: "gpu.example.com", Data: "opaque"}}}
	stored.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: types.UID("u1")}}
	expect(t, admin(t, "PUT", path2(ns, "resourceclaims")+"/alloc/status", &stored), 200)
	var view resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/alloc", nil).into(t, &view)
	if view.Status.Allocation == nil || len(view.Status.ReservedFor) != 1 || view.Status.ReservedFor[0].UID != "u1" {
		t.Fatalf("v1 view of an allocated v1alpha2 claim: %+v", view.Status)
	}
}

// Quota counts claims of both versions; v1 claims also count their
// devices per DeviceClass, under upstream's resource names.
func TestClaimQuotaAcrossVersions(t *testing.T) {
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"count/resourceclaims.resource.k8s.io":                mustQuantity("2"),
		"gpu.example.com.deviceclass.resource.k8s.io/devices": mustQuantity("3"),
	}}}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/resourcequotas", quota), 201)
	big := v1Claim("big")
	big.Spec.Devices.Requests[0].Exactly.Count = 4
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), big), 403, "gpu.example.com.deviceclass.resource.k8s.io/devices")
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("one")), 201)
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("two", "gpu")), 201)
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("three", "gpu")), 403, "count/resourceclaims.resource.k8s.io")
	expect(t, admin(t, "DELETE", path1(ns, "resourceclaims")+"/one", nil), 200)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("again")), 201)
	var q corev1.ResourceQuota
	admin(t, "GET", "/api/v1/namespaces/"+ns+"/resourcequotas/q", nil).into(t, &q)
	if u := q.Status.Used["count/resourceclaims.resource.k8s.io"]; u.Value() != 2 {
		t.Errorf("claims used = %s, want 2", u.String())
	}
	if u := q.Status.Used["gpu.example.com.deviceclass.resource.k8s.io/devices"]; u.Value() != 1 {
		t.Errorf("devices used = %s, want 1", u.String())
	}
}

// Users write v1 claims but not their allocation or the marks allot's
// components set.
func TestV1ClaimAuthorization(t *testing.T) {
	ns := newNamespace(t)
	expect(t, call(t, "user", "POST", path1(ns, "resourceclaims"), v1Claim("mine")), 201)
	marked := v1Claim("marked")
	marked.Finalizers = []string{resourcev1alpha2.DeleteProtectionFinalizer}
	expect(t, call(t, "user", "POST", path1(ns, "resourceclaims"), marked), 403, "finalizer")
	var c resourcev1.ResourceClaim
	call(t, "user", "GET", path1(ns, "resourceclaims")+"/mine", nil).into(t, &c)
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}}}
	expect(t, call(t, "user", "PUT", path1(ns, "resourceclaims")+"/mine/status", &c), 403)
	expect(t, admin(t, "PUT", path1(ns, "resourceclaims")+"/mine/status", &c), 403, "pods/binding")
	expect(t, call(t, "sched", "PUT", path1(ns, "resourceclaims")+"/mine/status", &c), 403, "pods/binding")
	expect(t, call(t, "driver", "PUT", path1(ns, "resourceclaims")+"/mine/status", &c), 403)
}

// adminAccess only in namespaces labelled for it; selectors compile at
// admission.
func TestV1ClaimAdmission(t *testing.T) {
	ns := newNamespace(t)
	c := v1Claim("admin")
	c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptrTo(true)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), c), 422, "spec.devices.requests[0].exactly.adminAccess", resourcev1.DRAAdminNamespaceLabelKey)
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "admin"}, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: c.Spec}}
	expect(t, admin(t, "POST", path1(ns, "resourceclaimtemplates"), tmpl), 422, "spec.spec.devices.requests[0].exactly.adminAccess")
	expect(t, admin(t, "PATCH", "/api/v1/namespaces/"+ns, `{"metadata":{"labels":{"resource.kubernetes.io/admin-access":"true"}}}`,
		"Content-Type", "application/merge-patch+json"), 200)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), c), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaimtemplates"), tmpl), 201)

	bad := v1Claim("bad-cel")
	bad.Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression = `device.attributes["gpu.example.com"].model ==`
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), bad), 422, "spec.devices.requests[0].exactly.selectors[0].cel.expression")
	bad.Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression = `device.driver + "x"`
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), bad), 422, "selectors[0].cel.expression")
}

// Device taints get their timeAdded from the server. A slice rewritten
// with the same taint without timeAdded keeps the stored time (NoExecute
// tolerations count from it); a new taint gets the time of the update.
func TestV1TaintsStamped(t *testing.T) {
	ctx := context.Background()
	c := v1Client(t, "admin", true).ResourceSlices()
	s := gpuSlice(fmt.Sprintf("tainted-%d", time.Now().UnixNano()), "n-taint", "gpu.example.com", 1)
	s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	got, err := c.Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := got.Spec.Devices[0].Taints[0].TimeAdded
	if first == nil {
		t.Fatalf("taint without timeAdded: %+v", got.Spec.Devices[0].Taints[0])
	}
	old := metav1.NewTime(first.Add(-time.Hour))
	got.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{
		{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoExecute},
		{Key: "example.com/hot", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &old},
		{Key: "example.com/new", Effect: resourcev1.DeviceTaintEffectNoExecute},
	}
	upd, err := c.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := upd.Spec.Devices[0].Taints
	if !ts[0].TimeAdded.Equal(first) || !ts[1].TimeAdded.Equal(&old) || ts[2].TimeAdded == nil || ts[2].TimeAdded.Before(first) {
		t.Fatalf("taints after the update: %+v; want the first kept at %v, the second as sent, the third stamped", ts, first)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A foreground deletion through a view (the garbage collector uses the
// preferred version) adds its finalizer as on the stored version.
func TestForegroundDeletionThroughView(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("fg", "gpu")), 201)
	expect(t, admin(t, "DELETE", path1(ns, "resourceclaims")+"/fg", `{"propagationPolicy":"Foreground"}`), 202)
	var c resourcev1alpha2.ResourceClaim
	admin(t, "GET", path2(ns, "resourceclaims")+"/fg", nil).into(t, &c)
	if c.DeletionTimestamp == nil || len(c.Finalizers) != 1 || c.Finalizers[0] != "foregroundDeletion" || c.Spec.ResourceClassName != "gpu" {
		t.Fatalf("claim after a foreground delete through v1: %+v", c.ObjectMeta)
	}
}
