package translator

import (
	"context"
	"os"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/pkg/allocator"
)

// seedSlice is seed 002's example slice, published by gpu.example.com.
func seedSlice(t *testing.T) *resourceapi.NodeResourceSlice {
	t.Helper()
	f, err := os.Open("../../manifests/seed-002.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := scheme.SplitYAML(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		obj, _, err := scheme.Decode(d)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := obj.(*resourceapi.NodeResourceSlice); ok {
			s.Spec.DriverName = DriverName
			return s
		}
	}
	t.Fatal("seed-002.yaml has no NodeResourceSlice")
	return nil
}

// Memory of each leaf of seed 002's slice.
var seedMemory = map[string]int{
	"gpu-0":                                  16,
	"partitionable-gpu-1/full-gpu/gpu-1":     32,
	"partitionable-gpu-1/quarters/quarter-0": 8, "partitionable-gpu-1/quarters/quarter-1": 8,
	"partitionable-gpu-1/quarters/quarter-2": 8, "partitionable-gpu-1/quarters/quarter-3": 8,
	"partitionable-gpu-1/half-and-quarters/first-half":                                   16,
	"partitionable-gpu-1/half-and-quarters/partitionable-second-half/half/second-half":   16,
	"partitionable-gpu-1/half-and-quarters/partitionable-second-half/quarters/quarter-0": 8,
	"partitionable-gpu-1/half-and-quarters/partitionable-second-half/quarters/quarter-1": 8,
}

// TestTranslationAllocates: what the scheduler's allocator does with the
// translations on seed 002's slice (runtimeVersion 11.1.42; one 16Gi GPU,
// and a 32Gi GPU that splits into halves of 16Gi and quarters of 8Gi).
func TestTranslationAllocates(t *testing.T) {
	model := allocator.NewModel("worker-1", []*resourceapi.NodeResourceSlice{seedSlice(t)})
	if p := model.Problems(); len(p) > 0 {
		t.Fatalf("seed slice problems: %v", p)
	}
	state := allocator.NewNodeState(model, nil, nil)
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, DriverName: DriverName}
	tests := map[string]struct {
		params    paramsBuilder
		fits      bool
		minMemory int
		reason    allocator.ReasonCode
		clause    string
	}{
		"16Gi: a whole GPU or a half":     {params: gpuParams("p").memory("16Gi"), fits: true, minMemory: 16},
		"16Gi, two":                       {params: gpuParams("p").memory("16Gi").count(2), fits: true, minMemory: 16},
		"16Gi, three: gpu-0 and halves":   {params: gpuParams("p").memory("16Gi").count(3), fits: true, minMemory: 16},
		"16Gi, four: halves exclude full": {params: gpuParams("p").memory("16Gi").count(4), reason: allocator.ReasonNotEnough},
		"32Gi: only the whole A4":         {params: gpuParams("p").memory("32Gi"), fits: true, minMemory: 32},
		"five of anything: quarters":      {params: gpuParams("p").count(5), fits: true},
		"six of anything":                 {params: gpuParams("p").count(6), reason: allocator.ReasonNotEnough},
		"runtime 11 and 8Gi, two":         {params: gpuParams("p").runtime("v11.0.0").memory("8Gi").count(2), fits: true, minMemory: 8},
		"runtime 12: too new": {params: gpuParams("p").runtime("v12.0.0").memory("8Gi"),
			reason: allocator.ReasonNoMatch, clause: `versions["runtimeVersion"] >= "12.0.0"`},
		"64Gi: too big": {params: gpuParams("p").memory("64Gi"),
			reason: allocator.ReasonNoMatch, clause: `quantities["memory"] >= "64Gi"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			params, err := Translate(tc.params.ns("ns").obj())
			if err != nil {
				t.Fatal(err)
			}
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
				Spec: resourceapi.ResourceClaimSpec{ResourceClassName: class.Name,
					ParametersRef: &resourceapi.ResourceClaimParametersReference{APIGroup: Group, Kind: Kind, Name: "p"}}}
			req := allocator.Prepare(nil, []allocator.Claim{{Claim: claim, Class: class, ClaimParameters: params}})
			res, err := allocator.Allocate(context.Background(), req, state)
			if err != nil {
				t.Fatal(err)
			}
			if res.Fits != tc.fits {
				t.Fatalf("fits = %v, want %v; reasons %v", res.Fits, tc.fits, res.Reasons)
			}
			if !tc.fits {
				if len(res.Reasons) == 0 || res.Reasons[0].Code != tc.reason || res.Reasons[0].Clause != tc.clause {
					t.Fatalf("reasons = %+v, want %s naming clause %q", res.Reasons, tc.reason, tc.clause)
				}
				return
			}
			h := res.Allocations[0].ResourceHandles[0].StructuredData
			if string(h.VendorClaimParameters.Raw) != string(params.VendorParameters.Raw) || h.NodeName != "worker-1" {
				t.Errorf("handle: node %s, vendor parameters %s, want the translation's", h.NodeName, h.VendorClaimParameters.Raw)
			}
			if res.Allocations[0].Shareable != params.Shareable {
				t.Errorf("allocation shareable = %v, want %v", res.Allocations[0].Shareable, params.Shareable)
			}
			count := len(params.Requests[0].Partitionable.Required)
			if len(h.Partitionable.Instances) != count {
				t.Fatalf("%d instances allocated, want %d", len(h.Partitionable.Instances), count)
			}
			var ids []string
			for _, in := range h.Partitionable.Instances {
				mem, known := seedMemory[in.ID]
				if !known || mem < tc.minMemory || slices.Contains(ids, in.ID) {
					t.Errorf("allocated %s (%dGi), want distinct leaves with at least %dGi", in.ID, mem, tc.minMemory)
				}
				ids = append(ids, in.ID)
			}
		})
	}
}
