package translator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// The driver and its claim parameters kind.
const (
	DriverName = "gpu.example.com"
	Group      = "gpu.example.com"
	Version    = "v1alpha1"
	Kind       = "GpuClaimParameters"
	Resource   = "gpuclaimparameters"
)

// GroupVersionResource names the GpuClaimParameters resource.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// The attributes of the driver's instances that the selectors read.
const (
	AttributeMemory         = "memory"         // a quantity
	AttributeRuntimeVersion = "runtimeVersion" // a version
)

// Sharing strategies of spec.sharing.strategy. TimeSlicing and
// SpacePartitioning make the claim shareable by several pods.
const (
	StrategyExclusive         = "Exclusive"
	StrategyTimeSlicing       = "TimeSlicing"
	StrategySpacePartitioning = "SpacePartitioning"
)

var strategies = []string{StrategyExclusive, StrategyTimeSlicing, StrategySpacePartitioning}

// Limits of spec.count, as the CRD's schema states them.
const (
	MinCount = 1
	MaxCount = 8
)

// spec is a parsed GpuClaimParameters spec.
type spec struct {
	count     int
	memory    *resource.Quantity
	runtime   string // canonical version, "" when not set
	strategy  string
	shareable bool
}

// Translate builds the ResourceClaimParameters for a GpuClaimParameters.
// It reads only the object and returns a new one. An invalid spec is an
// error that names each bad field (spec.count, spec.minimumMemory, ...).
func Translate(obj *unstructured.Unstructured) (*resourceapi.ResourceClaimParameters, error) {
	raw, rawErr := specOf(obj.Object)
	if rawErr != nil {
		return nil, field.ErrorList{rawErr}.ToAggregate()
	}
	sp, errs := parseSpec(raw)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	vendor, err := json.Marshal(map[string]any{"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(), "spec": raw})
	if err != nil {
		return nil, fmt.Errorf("encode vendor parameters: %w", err)
	}
	sel := sp.selector()
	if err := allocator.CompileSelector(sel); err != nil {
		return nil, fmt.Errorf("generated selector %s: %w", sel, err)
	}
	required := make([]resourceapi.PartitionableResourceRequest, sp.count)
	for i := range required {
		required[i] = resourceapi.PartitionableResourceRequest{Name: fmt.Sprintf("gpu-%d", i), Selector: sel}
	}
	yes := true
	return &resourceapi.ResourceClaimParameters{
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(), Controller: &yes,
			}},
		},
		GeneratedFrom:    generatedFrom(obj.GetName()),
		VendorParameters: &runtime.RawExtension{Raw: vendor},
		Shareable:        sp.shareable,
		Requests: []resourceapi.ResourceRequest{{
			DriverName: DriverName,
			ResourceRequestModel: resourceapi.ResourceRequestModel{
				Partitionable: &resourceapi.PartitionableResourceRequests{Required: required},
			},
		}},
	}, nil
}

// generatedFrom is the reference by which the scheduler finds the
// translation of the GpuClaimParameters name.
func generatedFrom(name string) *resourceapi.ResourceClaimParametersReference {
	return &resourceapi.ResourceClaimParametersReference{APIGroup: Group, Kind: Kind, Name: name}
}

// selector is the CEL selector of every required instance: each clause the
// spec sets, joined with &&, so that `allot explain` can name the clause
// that rejected a node's instances.
func (s spec) selector() string {
	var clauses []string
	if s.runtime != "" {
		clauses = append(clauses, fmt.Sprintf("%s[%q] >= %q", allocator.VarVersions, AttributeRuntimeVersion, s.runtime))
	}
	if s.memory != nil {
		clauses = append(clauses, fmt.Sprintf("%s[%q] >= %q", allocator.VarQuantities, AttributeMemory, s.memory.String()))
	}
	if len(clauses) == 0 {
		return "true"
	}
	return strings.Join(clauses, " && ")
}

var specPath = field.NewPath("spec")

// specOf returns the object's spec; a missing spec is empty.
func specOf(obj map[string]any) (map[string]any, *field.Error) {
	v, ok := obj["spec"]
	if !ok || v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, field.Invalid(specPath, v, "must be an object")
	}
	return m, nil
}

// parseSpec checks every field and reports all problems, each with its
// path.
func parseSpec(raw map[string]any) (spec, field.ErrorList) {
	var errs field.ErrorList
	sp := spec{count: MinCount, strategy: StrategyExclusive}
	if v, ok := raw["count"]; ok && v != nil {
		n, err := parseCount(v, specPath.Child("count"))
		errs = append(errs, err...)
		sp.count = n
	}
	if s, err := optionalString(raw, "minimumMemory", specPath); err != nil {
		errs = append(errs, err)
	} else if s != "" {
		q, err := parseMemory(s, specPath.Child("minimumMemory"))
		errs = append(errs, err...)
		sp.memory = q
	}
	if s, err := optionalString(raw, "minimumRuntimeVersion", specPath); err != nil {
		errs = append(errs, err)
	} else if s != "" {
		v, err := parseVersion(s, specPath.Child("minimumRuntimeVersion"))
		errs = append(errs, err...)
		sp.runtime = v
	}
	strategy, err := parseStrategy(raw)
	errs = append(errs, err...)
	if strategy != "" {
		sp.strategy = strategy
	}
	sp.shareable = sp.strategy == StrategyTimeSlicing || sp.strategy == StrategySpacePartitioning
	return sp, errs
}

func parseCount(v any, path *field.Path) (int, field.ErrorList) {
	var n int64
	switch c := v.(type) {
	case int64:
		n = c
	case float64:
		if c != float64(int64(c)) {
			return 0, field.ErrorList{field.Invalid(path, v, "must be an integer")}
		}
		n = int64(c)
	default:
		return 0, field.ErrorList{field.Invalid(path, v, "must be an integer")}
	}
	if n < MinCount || n > MaxCount {
		return 0, field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be between %d and %d", MinCount, MaxCount))}
	}
	return int(n), nil
}

// quantityShape is the form of minimumMemory: a non-negative decimal with
// an optional binary or decimal suffix, or an exponent of at most three
// digits. It is checked before resource.ParseQuantity, whose running time
// grows with the exponent's magnitude ("1e-99999999999" takes minutes).
var quantityShape = regexp.MustCompile(`^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?$`)

// Length limits of minimumMemory and minimumRuntimeVersion, as in the
// CRD's schema.
const (
	maxQuantityLength = 64
	maxVersionLength  = 64
)

func parseMemory(s string, path *field.Path) (*resource.Quantity, field.ErrorList) {
	if len(s) > maxQuantityLength {
		return nil, field.ErrorList{field.TooLong(path, s, maxQuantityLength)}
	}
	if strings.HasPrefix(s, "-") {
		return nil, field.ErrorList{field.Invalid(path, s, "must not be negative")}
	}
	if !quantityShape.MatchString(s) {
		return nil, field.ErrorList{field.Invalid(path, s, "not a quantity such as 16Gi, 512Mi or 1.5e9")}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path, s, "not a quantity such as 16Gi: "+err.Error())}
	}
	return &q, nil
}

// parseVersion returns the canonical form of a version (v12 is 12.0.0).
func parseVersion(s string, path *field.Path) (string, field.ErrorList) {
	if len(s) > maxVersionLength {
		return "", field.ErrorList{field.TooLong(path, s, maxVersionLength)}
	}
	v, err := allocator.ParseVersion(s)
	if err != nil {
		return "", field.ErrorList{field.Invalid(path, s, "not a semantic version such as v12.0.0")}
	}
	return v.String(), nil
}

func parseStrategy(raw map[string]any) (string, field.ErrorList) {
	sharingPath := specPath.Child("sharing")
	v, ok := raw["sharing"]
	if !ok || v == nil {
		return "", nil
	}
	sharing, ok := v.(map[string]any)
	if !ok {
		return "", field.ErrorList{field.Invalid(sharingPath, v, "must be an object")}
	}
	s, err := optionalString(sharing, "strategy", sharingPath)
	if err != nil {
		return "", field.ErrorList{err}
	}
	if s == "" {
		return "", nil
	}
	for _, known := range strategies {
		if s == known {
			return s, nil
		}
	}
	return "", field.ErrorList{field.NotSupported(sharingPath.Child("strategy"), s, strategies)}
}

// optionalString reads parent[key]: "" when absent or null, an error when
// it is not a string.
func optionalString(parent map[string]any, key string, path *field.Path) (string, *field.Error) {
	v, ok := parent[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", field.Invalid(path.Child(key), v, "must be a string")
	}
	return strings.TrimSpace(s), nil
}
