package gpudriver

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The vendor parameter kinds, in API group gpu.example.com.
const (
	// ParametersAPIVersion is the apiVersion of both parameter kinds.
	ParametersAPIVersion = "gpu.example.com/v1alpha1"
	// ClaimParametersKind is the kind of a claim's parameters.
	ClaimParametersKind = "GpuClaimParameters"
	// ClassParametersKind is the kind of a class's parameters, set by an
	// administrator.
	ClassParametersKind = "GpuClassParameters"
)

// GpuClaimParameters is what a user asks for; the scheduler hands a
// snapshot to the driver in the claim's StructuredResourceHandle
// (vendorClaimParameters). The driver reads only the sharing strategy; the
// rest was turned into selectors by the translator.
type GpuClaimParameters struct {
	metav1.TypeMeta `json:",inline"`
	Spec            GpuClaimParametersSpec `json:"spec"`
}

// GpuClaimParametersSpec is the request of GpuClaimParameters.
type GpuClaimParametersSpec struct {
	Count                 int                `json:"count,omitempty"`
	MinimumMemory         *resource.Quantity `json:"minimumMemory,omitempty"`
	MinimumRuntimeVersion string             `json:"minimumRuntimeVersion,omitempty"`
	Sharing               *GpuSharing        `json:"sharing,omitempty"`
}

// GpuSharing says how containers share the claim's GPUs.
type GpuSharing struct {
	// Strategy (for example TimeSliced) reaches containers as
	// GPU_SHARING_STRATEGY.
	Strategy string `json:"strategy,omitempty"`
}

// GpuClassParameters are a class's administrator-set parameters (seed
// 000): InitCommand runs on the node before each claim of the class is
// prepared, with GPU_DEVICE_IDS and GPU_CLAIM in its environment.
type GpuClassParameters struct {
	metav1.TypeMeta `json:",inline"`
	InitCommand     []string `json:"initCommand,omitempty"`
}

// sharingStrategy reads the strategy from a claim's vendor parameters;
// absent parameters mean no strategy.
func sharingStrategy(raw *runtime.RawExtension) (string, error) {
	var p GpuClaimParameters
	if ok, err := decodeVendor(raw, "vendorClaimParameters", ClaimParametersKind, &p, &p.TypeMeta); !ok || err != nil {
		return "", err
	}
	if p.Spec.Sharing == nil {
		return "", nil
	}
	return p.Spec.Sharing.Strategy, nil
}

// initCommand reads the command from a class's vendor parameters.
func initCommand(raw *runtime.RawExtension) ([]string, error) {
	var p GpuClassParameters
	if ok, err := decodeVendor(raw, "vendorClassParameters", ClassParametersKind, &p, &p.TypeMeta); !ok || err != nil {
		return nil, err
	}
	if len(p.InitCommand) > 0 && p.InitCommand[0] == "" {
		return nil, fmt.Errorf("vendorClassParameters.initCommand[0]: the program must not be empty")
	}
	return p.InitCommand, nil
}

// decodeVendor decodes a vendor parameters snapshot into obj and checks
// its type. It reports false for absent parameters. Unknown fields (the
// snapshot's metadata) are ignored.
func decodeVendor(raw *runtime.RawExtension, field, kind string, obj any, tm *metav1.TypeMeta) (bool, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(raw.Raw, obj); err != nil {
		return false, fmt.Errorf("%s: not a %s: %w", field, kind, err)
	}
	if tm.APIVersion != ParametersAPIVersion || tm.Kind != kind {
		return false, fmt.Errorf("%s: apiVersion %q, kind %q: want %s, %s", field, tm.APIVersion, tm.Kind, ParametersAPIVersion, kind)
	}
	return true, nil
}
