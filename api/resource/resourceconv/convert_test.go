package resourceconv

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

func seedClaim() *resourcev1alpha2.ResourceClaim {
	return &resourcev1alpha2.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"x": "y"}, Finalizers: []string{resourcev1alpha2.DeleteProtectionFinalizer}},
		Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"},
		Status: resourcev1alpha2.ResourceClaimStatus{
			DriverName: "gpu.example.com",
			Allocation: &resourcev1alpha2.AllocationResult{
				AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
				ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: "gpu.example.com", StructuredData: &resourcev1alpha2.StructuredResourceHandle{
					NodeName: "n1", Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{
						{ID: "gpu0/mig/a"}, {ID: "gpu1"}}}}}},
			},
			ReservedFor: []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: types.UID("pu")}},
		},
	}
}

func TestClaimToV1(t *testing.T) {
	in := seedClaim()
	orig := in.DeepCopy()
	v := ClaimToV1(in)
	if !apiequality.Semantic.DeepEqual(in, orig) {
		t.Fatal("the conversion changed its input")
	}
	if v.APIVersion != "resource.k8s.io/v1" || v.Kind != "ResourceClaim" {
		t.Errorf("type meta %+v", v.TypeMeta)
	}
	if v.Annotations[resourcev1alpha2.StoredVersionAnnotation] != "resource.k8s.io/v1alpha2" || v.Annotations["x"] != "y" ||
		v.Labels["a"] != "b" || v.UID != "u" || len(v.Finalizers) != 1 {
		t.Errorf("metadata %+v", v.ObjectMeta)
	}
	if len(v.Spec.Devices.Requests) != 0 {
		t.Errorf("a view has no spec: %+v", v.Spec)
	}
	want := []resourcev1.DeviceRequestAllocationResult{
		{Request: SeedRequestName, Driver: "gpu.example.com", Pool: "n1", Device: "gpu0--mig--a"},
		{Request: SeedRequestName, Driver: "gpu.example.com", Pool: "n1", Device: "gpu1"},
	}
	a := v.Status.Allocation
	if a == nil || !apiequality.Semantic.DeepEqual(a.Devices.Results, want) {
		t.Fatalf("results %+v, want %+v", a, want)
	}
	if a.NodeSelector == nil || a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n1" {
		t.Errorf("node selector %+v", a.NodeSelector)
	}
	if len(v.Status.ReservedFor) != 1 || v.Status.ReservedFor[0].UID != "pu" || v.Status.ReservedFor[0].Resource != "pods" {
		t.Errorf("reservedFor %+v", v.Status.ReservedFor)
	}
}

func TestClaimToV1alpha2(t *testing.T) {
	in := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"},
				{Request: "nic", Driver: "nic.example.com", Pool: "n1", Device: "eth1"},
				{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu0--mig--a"},
			}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "pu"}},
		},
	}
	v := ClaimToV1alpha2(in)
	if v.Annotations[resourcev1alpha2.StoredVersionAnnotation] != "resource.k8s.io/v1" || in.Annotations != nil {
		t.Errorf("view annotation %v (input %v)", v.Annotations, in.Annotations)
	}
	hs := v.Status.Allocation.ResourceHandles
	if len(hs) != 2 || hs[0].DriverName != "gpu.example.com" || hs[1].DriverName != "nic.example.com" {
		t.Fatalf("handles %+v", hs)
	}
	var ids []string
	for _, i := range hs[0].StructuredData.Partitionable.Instances {
		ids = append(ids, i.ID)
	}
	if len(ids) != 2 || ids[0] != "gpu-0" || ids[1] != "gpu0/mig/a" {
		t.Errorf("gpu instances %v", ids)
	}
	if v.Status.DriverName != "" {
		t.Errorf("two drivers, yet driverName %q", v.Status.DriverName)
	}
	if len(v.Status.ReservedFor) != 1 || v.Status.ReservedFor[0].Name != "p" {
		t.Errorf("reservedFor %+v", v.Status.ReservedFor)
	}
}

// Converting a view back to the stored version keeps metadata and
// reservations (what a write through a view may change).
func TestRoundTripKeepsMetadataAndReservations(t *testing.T) {
	in := seedClaim()
	back := ClaimToV1alpha2(ClaimToV1(in))
	delete(back.Annotations, resourcev1alpha2.StoredVersionAnnotation)
	if !apiequality.Semantic.DeepEqual(back.ObjectMeta, in.ObjectMeta) || !apiequality.Semantic.DeepEqual(back.Status.ReservedFor, in.Status.ReservedFor) {
		t.Fatalf("round trip: %+v", back)
	}
	got := back.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances
	if !apiequality.Semantic.DeepEqual(got, in.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances) {
		t.Errorf("instances %+v", got)
	}
}

func TestConvertTemplatesAndRefusals(t *testing.T) {
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec: resourcev1.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k": "v"}}}}
	out, err := Convert(tmpl, resourcev1alpha2.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	v := out.(*resourcev1alpha2.ResourceClaimTemplate)
	if v.Spec.Labels["k"] != "v" || !resourcev1alpha2.IsView(v) {
		t.Errorf("template view %+v", v)
	}
	if same, err := Convert(tmpl, resourcev1.SchemeGroupVersion); err != nil || same != tmpl {
		t.Errorf("converting to its own version: %v, %v", same, err)
	}
	if _, err := Convert(&resourcev1.DeviceClass{}, resourcev1alpha2.SchemeGroupVersion); err == nil {
		t.Error("DeviceClass converted")
	}
}
