package fabricdriver

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// MaxCount bounds FabricClaimParameters.spec.count, as the CRD does.
const MaxCount = 16

// ClaimParameters is what a claim asks for: the spec of its
// FabricClaimParameters, or one unit of any model without parameters.
type ClaimParameters struct {
	// Count is the number of units, 1 to MaxCount.
	Count int
	// Model restricts the pools to those of this model; "" means any.
	Model string
	// Optional claims get nothing, rather than fail, when no pool has
	// enough free units.
	Optional bool
}

// defaultParameters is what a claim without parametersRef gets.
var defaultParameters = ClaimParameters{Count: 1}

// ParseClaimParameters reads the spec of a FabricClaimParameters object,
// applying the CRD's defaults to absent fields. Errors name the field.
func ParseClaimParameters(obj *unstructured.Unstructured) (*ClaimParameters, error) {
	p := defaultParameters
	spec, found, err := unstructured.NestedMap(obj.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if !found {
		return &p, nil
	}
	for k := range spec {
		if k != "count" && k != "model" && k != "optional" {
			return nil, fmt.Errorf("spec.%s: unknown field", k)
		}
	}
	if v, ok := spec["count"]; ok {
		n, ok := v.(int64)
		if !ok || n < 1 || n > MaxCount {
			return nil, fmt.Errorf("spec.count %v: must be an integer between 1 and %d", v, MaxCount)
		}
		p.Count = int(n)
	}
	if v, ok := spec["model"]; ok {
		if p.Model, ok = v.(string); !ok {
			return nil, fmt.Errorf("spec.model %v: must be a string", v)
		}
	}
	if v, ok := spec["optional"]; ok {
		if p.Optional, ok = v.(bool); !ok {
			return nil, fmt.Errorf("spec.optional %v: must be a boolean", v)
		}
	}
	return &p, nil
}

// errWrongParametersKind is returned for a claim whose parametersRef is
// not a FabricClaimParameters.
var errWrongParametersKind = errors.New("must refer to a " + Kind + " of API group " + Group)

// claimParameters resolves a claim's parametersRef by reading its
// FabricClaimParameters from the API server.
func claimParameters(ctx context.Context, dyn dynamic.Interface, claim *resourcev1alpha2.ResourceClaim) (*ClaimParameters, error) {
	ref := claim.Spec.ParametersRef
	if ref == nil {
		p := defaultParameters
		return &p, nil
	}
	if ref.APIGroup != Group || ref.Kind != Kind {
		return nil, fmt.Errorf("spec.parametersRef %s/%s: %w", ref.APIGroup, ref.Kind, errWrongParametersKind)
	}
	obj, err := dyn.Resource(GroupVersionResource).Namespace(claim.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", Kind, claim.Namespace, ref.Name, err)
	}
	p, err := ParseClaimParameters(obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", Kind, claim.Namespace, ref.Name, err)
	}
	return p, nil
}
