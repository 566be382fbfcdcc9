package dynamicresources

import (
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// TestNextReusesTheCatalog: Objects derived from one another share one
// allocator.Catalog; Next keeps it while the classes of both versions,
// parameters and vendor objects are the same objects (in any order, or
// relisted with the same UID and resourceVersion) and builds a new one
// when one changed.
func TestNextReusesTheCatalog(t *testing.T) {
	meta := func(ns, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"}
	}
	class := &resourceapi.ResourceClass{ObjectMeta: meta("", "gpu"), DriverName: "gpu.example.com"}
	deviceClass := &resourcev1.DeviceClass{ObjectMeta: meta("", "gpu-v1")}
	classParams := []*resourceapi.ResourceClassParameters{
		{ObjectMeta: meta("drivers", "cp-a")}, {ObjectMeta: meta("drivers", "cp-b")},
	}
	claimParams := []*resourceapi.ResourceClaimParameters{
		{ObjectMeta: meta("default", "small")}, {ObjectMeta: meta("default", "large")},
	}
	vendor := &unstructured.Unstructured{}
	vendor.SetAPIVersion("gpu.example.com/v1")
	vendor.SetKind("GpuClaimParameters")
	vendor.SetNamespace("default")
	vendor.SetName("p")
	vendor.SetUID("uid-p")
	vendor.SetResourceVersion("1")
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: meta("default", "c"),
		Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "gpu", ParametersRef: &resourceapi.ResourceClaimParametersReference{
			APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: "small",
		}},
	}
	lists := func() Lists {
		return Lists{
			Classes: []*resourceapi.ResourceClass{class}, ClassParameters: slices.Clone(classParams),
			ClaimParameters: slices.Clone(claimParams), Vendor: []*unstructured.Unstructured{vendor},
			Claims: []*resourceapi.ResourceClaim{claim}, DeviceClasses: []*resourcev1.DeviceClass{deviceClass},
		}
	}
	o := NewObjects(lists())
	if o.WithClaimChanges("2", ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/c": claim}}).catalog != o.catalog {
		t.Fatal("WithClaimChanges (v1alpha2 claims) built a catalog of its own")
	}
	if o.WithClaimChanges("2", ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/v": {ObjectMeta: meta("default", "v")}}}).catalog != o.catalog {
		t.Fatal("WithClaimChanges built a catalog of its own")
	}
	if o.catalog.DeviceClass("gpu-v1") != deviceClass {
		t.Fatal("the catalog does not hold the DeviceClass")
	}

	reordered := lists()
	slices.Reverse(reordered.ClassParameters)
	slices.Reverse(reordered.ClaimParameters)
	relisted := lists()
	relisted.Classes = []*resourceapi.ResourceClass{class.DeepCopy()}
	relisted.Vendor = []*unstructured.Unstructured{vendor.DeepCopy()}
	relisted.DeviceClasses = []*resourcev1.DeviceClass{deviceClass.DeepCopy()}
	for name, l := range map[string]Lists{"the same lists": lists(), "another order": reordered, "relisted objects": relisted} {
		if o.Next(l).catalog != o.catalog {
			t.Errorf("%s: Next built a new catalog", name)
		}
	}

	changed := lists()
	changed.ClaimParameters[0] = claimParams[0].DeepCopy()
	changed.ClaimParameters[0].ResourceVersion = "2"
	moreVendor := lists()
	moreVendor.Vendor = append(moreVendor.Vendor, vendor.DeepCopy())
	moreVendor.Vendor[1].SetName("q")
	moreVendor.Vendor[1].SetUID("uid-q")
	noClass := lists()
	noClass.Classes = nil
	fewerClassParams := lists()
	fewerClassParams.ClassParameters = fewerClassParams.ClassParameters[:1]
	changedDeviceClass := lists()
	changedDeviceClass.DeviceClasses = []*resourcev1.DeviceClass{deviceClass.DeepCopy()}
	changedDeviceClass.DeviceClasses[0].ResourceVersion = "2"
	for name, l := range map[string]Lists{
		"changed claim parameters": changed, "another vendor object": moreVendor,
		"class deleted": noClass, "class parameters deleted": fewerClassParams,
		"device class changed": changedDeviceClass,
	} {
		if o.Next(l).catalog == o.catalog {
			t.Errorf("%s: Next kept the old catalog", name)
		}
	}
	if c, missing, _ := o.Next(changed).resolve(claim); missing != "" || c.ClaimParameters != changed.ClaimParameters[0] {
		t.Errorf("after a change, the claim resolved to %p (missing %q), want the new parameters", c.ClaimParameters, missing)
	}
	if got := o.Next(changedDeviceClass).catalog.DeviceClass("gpu-v1"); got != changedDeviceClass.DeviceClasses[0] {
		t.Errorf("after a DeviceClass change the catalog holds %p, want the new class", got)
	}
	if _, missing, code := o.Next(noClass).resolve(claim); missing != "resource class gpu of claim default/c" || code != allocator.ReasonClassNotFound {
		t.Errorf("after the class was deleted: missing %q (%s), want the class", missing, code)
	}
}
