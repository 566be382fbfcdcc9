package allocator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Snapshot is the cluster state a simulation starts from. The simulation
// reads it and never modifies it; objects it changes are copied first.
type Snapshot struct {
	Nodes           []*corev1.Node
	Slices          []*resourceapi.NodeResourceSlice
	Classes         []*resourceapi.ResourceClass
	ClassParameters []*resourceapi.ResourceClassParameters
	ClaimParameters []*resourceapi.ResourceClaimParameters
	Claims          []*resourceapi.ResourceClaim
	ClaimTemplates  []*resourceapi.ResourceClaimTemplate
	// VendorParameters are the vendor objects that claims and classes refer
	// to (such as a CardParameters); they are snapshotted into allocations.
	VendorParameters []*unstructured.Unstructured
}

// catalog indexes the parts of a snapshot that a simulation only reads.
type catalog struct {
	classes        map[string]*resourceapi.ResourceClass
	classParams    map[string]*resourceapi.ResourceClassParameters
	classParamsGen map[resourceapi.ResourceClassParametersReference]*resourceapi.ResourceClassParameters
	claimParams    map[string]*resourceapi.ResourceClaimParameters // namespace/name
	claimParamsGen map[claimGenKey]*resourceapi.ResourceClaimParameters
	templates      map[string]*resourceapi.ResourceClaimTemplate // namespace/name
	vendor         map[vendorKey]*unstructured.Unstructured
}

type claimGenKey struct {
	namespace string
	ref       resourceapi.ResourceClaimParametersReference
}

type vendorKey struct {
	group, kind, namespace, name string
}

func newCatalog(s *Snapshot) *catalog {
	c := &catalog{
		classes:        map[string]*resourceapi.ResourceClass{},
		classParams:    map[string]*resourceapi.ResourceClassParameters{},
		classParamsGen: map[resourceapi.ResourceClassParametersReference]*resourceapi.ResourceClassParameters{},
		claimParams:    map[string]*resourceapi.ResourceClaimParameters{},
		claimParamsGen: map[claimGenKey]*resourceapi.ResourceClaimParameters{},
		templates:      map[string]*resourceapi.ResourceClaimTemplate{},
		vendor:         map[vendorKey]*unstructured.Unstructured{},
	}
	for _, o := range s.Classes {
		c.classes[o.Name] = o
	}
	// Sorted by name, so that when several parameter objects claim to be
	// generated from one vendor object, the first name wins everywhere.
	classParams := slices.Clone(s.ClassParameters)
	slices.SortFunc(classParams, func(a, b *resourceapi.ResourceClassParameters) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range classParams {
		c.classParams[o.Name] = o
		if g := o.GeneratedFrom; g != nil {
			if _, dup := c.classParamsGen[*g]; !dup {
				c.classParamsGen[*g] = o
			}
		}
	}
	claimParams := slices.Clone(s.ClaimParameters)
	slices.SortFunc(claimParams, func(a, b *resourceapi.ResourceClaimParameters) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, o := range claimParams {
		c.claimParams[o.Namespace+"/"+o.Name] = o
		if g := o.GeneratedFrom; g != nil {
			k := claimGenKey{namespace: o.Namespace, ref: *g}
			if _, dup := c.claimParamsGen[k]; !dup {
				c.claimParamsGen[k] = o
			}
		}
	}
	for _, o := range s.ClaimTemplates {
		c.templates[o.Namespace+"/"+o.Name] = o
	}
	for _, o := range s.VendorParameters {
		gvk := o.GroupVersionKind()
		c.vendor[vendorKey{group: gvk.Group, kind: gvk.Kind, namespace: o.GetNamespace(), name: o.GetName()}] = o
	}
	return c
}

// resolve fills in a Claim for a claim object: its class, the class and
// claim parameters and the vendor snapshots. Parameter references follow
// seed 002: kind ResourceClaimParameters (group resource.k8s.io) is looked
// up by name in the claim's namespace; any other kind is a vendor object,
// and the ResourceClaimParameters generated from it (generatedFrom equal to
// the reference) is used, with the vendor object itself as the snapshot
// when the simulation has it. Class parameters work the same way with
// ResourceClassParameters.
func (c *catalog) resolve(claim *resourceapi.ResourceClaim) (Claim, *Reason) {
	out := Claim{Claim: claim, Class: c.classes[claim.Spec.ResourceClassName]}
	key := claimKey(claim)
	if ref := claim.Spec.ParametersRef; ref != nil {
		if isBuiltin(ref.APIGroup, ref.Kind, "ResourceClaimParameters") {
			out.ClaimParameters = c.claimParams[claim.Namespace+"/"+ref.Name]
		} else {
			out.ClaimParameters = c.claimParamsGen[claimGenKey{namespace: claim.Namespace, ref: *ref}]
			out.VendorClaimParameters = c.vendorRaw(vendorKey{ref.APIGroup, ref.Kind, claim.Namespace, ref.Name})
		}
		if out.ClaimParameters == nil {
			r := newReason(ReasonParametersNotFound, key, "", nil, "",
				fmt.Sprintf("no ResourceClaimParameters for %s %s", ref.Kind, ref.Name))
			return out, &r
		}
	}
	if out.Class == nil {
		return out, nil // Prepare reports the missing class
	}
	if ref := out.Class.ParametersRef; ref != nil {
		if isBuiltin(ref.APIGroup, ref.Kind, "ResourceClassParameters") {
			out.ClassParameters = c.classParams[ref.Name]
		} else {
			out.ClassParameters = c.classParamsGen[*ref]
			out.VendorClassParameters = c.vendorRaw(vendorKey{ref.APIGroup, ref.Kind, ref.Namespace, ref.Name})
		}
		if out.ClassParameters == nil {
			r := newReason(ReasonParametersNotFound, key, "", nil, "",
				fmt.Sprintf("no ResourceClassParameters for %s %s of class %s", ref.Kind, ref.Name, out.Class.Name))
			return out, &r
		}
	}
	return out, nil
}

func isBuiltin(group, kind, want string) bool {
	return kind == want && (group == "" || group == resourceapi.GroupName)
}

// vendorRaw snapshots a vendor object as JSON, or returns nil when the
// simulation does not have it (the parameters' VendorParameters are used).
func (c *catalog) vendorRaw(k vendorKey) *runtime.RawExtension {
	u := c.vendor[k]
	if u == nil {
		return nil
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		// Objects decoded from JSON or YAML always marshal; anything else
		// falls back to the parameters' own vendorParameters.
		return nil
	}
	return &runtime.RawExtension{Raw: raw}
}
