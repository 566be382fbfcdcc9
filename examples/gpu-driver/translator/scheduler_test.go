package translator

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/examples/gpu-driver/deploy"
	"allot.dev/allot/internal/scheduler/simulate"
)

// decodeAll strictly decodes a manifest; namespaced objects without a
// namespace get ns.
func decodeAll(t *testing.T, data []byte, ns string) []runtime.Object {
	t.Helper()
	docs, err := scheme.SplitYAML(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, d := range docs {
		obj, _, err := scheme.Decode(d)
		if err != nil {
			t.Fatal(err)
		}
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			o.SetNamespace(ns)
		case *resourceapi.ResourceClaimTemplate:
			o.Namespace = ns
		case *corev1.Pod:
			o.Namespace = ns
		}
		out = append(out, obj)
	}
	return out
}

// TestSchedulerUsesTranslation schedules the deploy example's pod with the
// scheduler's own plugins (internal/scheduler/simulate) on a node publishing
// seed 002's slice for gpu.example.com: without a translation the pod
// waits; with it, the pod gets one GPU of at least 16Gi, shareable, and
// the allocation carries the GpuClaimParameters and the class's
// GpuClassParameters for the kubelet plugin.
func TestSchedulerUsesTranslation(t *testing.T) {
	seed, err := os.ReadFile("../../manifests/seed-002.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var base []runtime.Object
	for _, obj := range decodeAll(t, seed, "") {
		switch o := obj.(type) {
		case *corev1.Node:
			base = append(base, o)
		case *resourceapi.NodeResourceSlice:
			o.Spec.DriverName = DriverName
			base = append(base, o)
		}
	}
	base = append(base, decodeAll(t, deploy.Class, "")...)
	example := decodeAll(t, deploy.Example, "demo")
	base = append(base, example...)
	params := example[0].(*unstructured.Unstructured)
	params.SetUID("uid-shared-gpu")

	out, err := simulate.Run(context.Background(), base, simulate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := out.Pods[0]
	if pod.Spec.NodeName != "" {
		t.Fatalf("without a translation the pod was scheduled to %s", pod.Spec.NodeName)
	}
	if c := pod.Status.Conditions; len(c) != 1 || !strings.Contains(c[0].Message, "waiting for ResourceClaimParameters for GpuClaimParameters shared-gpu") {
		t.Fatalf("without a translation: conditions %+v, want the pod waiting for the translation", c)
	}

	translation, err := Translate(params)
	if err != nil {
		t.Fatal(err)
	}
	out, err = simulate.Run(context.Background(), append(base, translation), simulate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pod := out.Pods[0]; pod.Spec.NodeName != "worker-1" {
		t.Fatalf("pod on %q, want worker-1; decisions %+v", pod.Spec.NodeName, out.Decisions)
	}
	if len(out.Claims) != 1 || out.Claims[0].Status.Allocation == nil {
		t.Fatalf("claims = %+v, want one allocated", out.Claims)
	}
	alloc := out.Claims[0].Status.Allocation
	h := alloc.ResourceHandles[0]
	if h.DriverName != DriverName || len(h.StructuredData.Partitionable.Instances) != 1 || !alloc.Shareable {
		t.Fatalf("allocation = %+v, want one instance of %s, shareable", alloc, DriverName)
	}
	if id := h.StructuredData.Partitionable.Instances[0].ID; seedMemory[id] < 16 {
		t.Errorf("allocated %s with %dGi, want at least 16Gi", id, seedMemory[id])
	}
	claimParams, classParams := string(h.StructuredData.VendorClaimParameters.Raw), string(h.StructuredData.VendorClassParameters.Raw)
	if !strings.Contains(claimParams, `"kind":"GpuClaimParameters"`) || !strings.Contains(claimParams, `"strategy":"TimeSlicing"`) {
		t.Errorf("vendorClaimParameters = %s", claimParams)
	}
	if !strings.Contains(classParams, `"kind":"GpuClassParameters"`) || !strings.Contains(classParams, `"initCommand"`) {
		t.Errorf("vendorClassParameters = %s", classParams)
	}
}
