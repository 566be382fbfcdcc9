package allocator

import (
	"encoding/json"
	"slices"
	"strings"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Catalog indexes the DRA objects that claims are resolved against:
// classes, class and claim parameters (by name, and by the vendor object
// they were generated from), claim templates and vendor parameter objects,
// and resource.k8s.io/v1 DeviceClasses and claim templates. It is the one
// place that knows how a claim finds its class and parameters; the
// simulation and the scheduler's plugin both read it. A Catalog is
// immutable and safe for concurrent use.
//
// Parameter references follow seed 002: kind ResourceClaimParameters
// (group resource.k8s.io, or "") is looked up by name in the claim's
// namespace; any other kind is a vendor object, and the
// ResourceClaimParameters generated from it (generatedFrom equal to the
// reference) is used, with the vendor object itself as the snapshot when
// the catalog has it. Class parameters work the same way with
// ResourceClassParameters. When several parameter objects say they were
// generated from one vendor object, the first by (namespace and) name wins.
type Catalog struct {
	in             Snapshot // the lists it was built from (see Inputs)
	classes        map[string]*resourceapi.ResourceClass
	classParams    map[string]*resourceapi.ResourceClassParameters
	classParamsGen map[resourceapi.ResourceClassParametersReference]*resourceapi.ResourceClassParameters
	claimParams    map[string]*resourceapi.ResourceClaimParameters // namespace/name
	claimParamsGen map[claimGenKey]*resourceapi.ResourceClaimParameters
	templates      map[string]*resourceapi.ResourceClaimTemplate // namespace/name
	vendor         map[vendorKey]*unstructured.Unstructured
	deviceClasses  map[string]*resourcev1.DeviceClass
	extended       map[string]*resourcev1.DeviceClass           // by spec.extendedResourceName: the class that serves it
	v1Templates    map[string]*resourcev1.ResourceClaimTemplate // namespace/name
}

type claimGenKey struct {
	namespace string
	ref       resourceapi.ResourceClaimParametersReference
}

type vendorKey struct {
	group, kind, namespace, name string
}

// NewCatalog indexes the classes, parameters, claim templates and vendor
// parameters of s, and its DeviceClasses and v1 claim templates; its
// nodes, slices, claims and taint rules are not read. The lists are not
// copied; callers must not modify them or their objects afterwards.
func NewCatalog(s *Snapshot) *Catalog {
	c := &Catalog{
		in: Snapshot{
			Classes: s.Classes, ClassParameters: s.ClassParameters, ClaimParameters: s.ClaimParameters,
			ClaimTemplates: s.ClaimTemplates, VendorParameters: s.VendorParameters,
			DeviceClasses: s.DeviceClasses, V1ClaimTemplates: s.V1ClaimTemplates,
		},
		deviceClasses:  make(map[string]*resourcev1.DeviceClass, len(s.DeviceClasses)),
		v1Templates:    make(map[string]*resourcev1.ResourceClaimTemplate, len(s.V1ClaimTemplates)),
		classes:        make(map[string]*resourceapi.ResourceClass, len(s.Classes)),
		classParams:    make(map[string]*resourceapi.ResourceClassParameters, len(s.ClassParameters)),
		classParamsGen: map[resourceapi.ResourceClassParametersReference]*resourceapi.ResourceClassParameters{},
		claimParams:    make(map[string]*resourceapi.ResourceClaimParameters, len(s.ClaimParameters)),
		claimParamsGen: map[claimGenKey]*resourceapi.ResourceClaimParameters{},
		templates:      make(map[string]*resourceapi.ResourceClaimTemplate, len(s.ClaimTemplates)),
		vendor:         make(map[vendorKey]*unstructured.Unstructured, len(s.VendorParameters)),
	}
	for _, o := range s.Classes {
		c.classes[o.Name] = o
	}
	// Sorted by name, so that when several parameter objects claim to be
	// generated from one vendor object, the first name wins everywhere
	// (listers return objects in no fixed order).
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
	for _, o := range s.DeviceClasses {
		c.deviceClasses[o.Name] = o
		if n := o.Spec.ExtendedResourceName; n != nil && *n != "" {
			if c.extended == nil {
				c.extended = map[string]*resourcev1.DeviceClass{}
			}
			if cur := c.extended[*n]; cur == nil || servesBefore(o, cur) {
				c.extended[*n] = o
			}
		}
	}
	for _, o := range s.V1ClaimTemplates {
		c.v1Templates[o.Namespace+"/"+o.Name] = o
	}
	return c
}

// servesBefore reports whether class a serves a shared extended resource
// name rather than b: the newer class wins, ties go to the first name (as
// DeviceClassSpec.ExtendedResourceName says).
func servesBefore(a, b *resourcev1.DeviceClass) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return tb.Before(&ta)
	}
	return a.Name < b.Name
}

// DeviceClassResourcePrefix names the extended resource every DeviceClass
// offers: deviceclass.resource.kubernetes.io/CLASS.
const DeviceClassResourcePrefix = "deviceclass.resource.kubernetes.io/"

// ExtendedResourceClass returns the DeviceClass that serves the extended
// resource name through DRA: the class whose spec.extendedResourceName it
// is (the newest such class, ties by name), or class CLASS for
// deviceclass.resource.kubernetes.io/CLASS; nil when none does.
func (c *Catalog) ExtendedResourceClass(name string) *resourcev1.DeviceClass {
	if class, ok := strings.CutPrefix(name, DeviceClassResourcePrefix); ok {
		return c.deviceClasses[class]
	}
	return c.extended[name]
}

// Inputs returns the lists c was built from: its Classes,
// ClassParameters, ClaimParameters, ClaimTemplates, VendorParameters,
// DeviceClasses and V1ClaimTemplates (the other fields are nil). A caller
// that lists the objects again can keep c when they are the same objects.
// Do not modify them.
func (c *Catalog) Inputs() Snapshot { return c.in }

// Class returns the class of that name, or nil.
func (c *Catalog) Class(name string) *resourceapi.ResourceClass { return c.classes[name] }

// DeviceClass returns the resource.k8s.io/v1 DeviceClass of that name, or
// nil; it is PrepareV1's class function.
func (c *Catalog) DeviceClass(name string) *resourcev1.DeviceClass { return c.deviceClasses[name] }

// V1ClaimTemplate returns the resource.k8s.io/v1 ResourceClaimTemplate
// namespace/name, or nil.
func (c *Catalog) V1ClaimTemplate(namespace, name string) *resourcev1.ResourceClaimTemplate {
	return c.v1Templates[namespace+"/"+name]
}

// ClaimParameters returns the ResourceClaimParameters a claim in namespace
// refers to with ref (nil when there is none) and, for a vendor
// reference, the vendor object as JSON when the catalog has it.
func (c *Catalog) ClaimParameters(namespace string, ref *resourceapi.ResourceClaimParametersReference) (*resourceapi.ResourceClaimParameters, *runtime.RawExtension) {
	if isBuiltin(ref.APIGroup, ref.Kind, "ResourceClaimParameters") {
		return c.claimParams[namespace+"/"+ref.Name], nil
	}
	return c.claimParamsGen[claimGenKey{namespace: namespace, ref: *ref}],
		c.vendorRaw(vendorKey{ref.APIGroup, ref.Kind, namespace, ref.Name})
}

// ClassParameters returns the ResourceClassParameters a class refers to
// with ref (nil when there is none) and, for a vendor reference, the
// vendor object as JSON when the catalog has it.
func (c *Catalog) ClassParameters(ref *resourceapi.ResourceClassParametersReference) (*resourceapi.ResourceClassParameters, *runtime.RawExtension) {
	if isBuiltin(ref.APIGroup, ref.Kind, "ResourceClassParameters") {
		return c.classParams[ref.Name], nil
	}
	return c.classParamsGen[*ref], c.vendorRaw(vendorKey{ref.APIGroup, ref.Kind, ref.Namespace, ref.Name})
}

// MissingKind is what a claim refers to that a Catalog does not have.
type MissingKind int

const (
	// MissingClass: the claim's ResourceClass (Missing.Class).
	MissingClass MissingKind = iota + 1
	// MissingClaimParameters: the ResourceClaimParameters for the claim's
	// parametersRef (Missing.RefKind, Missing.RefName).
	MissingClaimParameters
	// MissingClassParameters: the ResourceClassParameters for the
	// parametersRef of the claim's class (Missing.Class, Missing.RefKind,
	// Missing.RefName).
	MissingClassParameters
)

// Missing describes one object a claim refers to that a Catalog does not
// have; callers word their own messages from it.
type Missing struct {
	Kind  MissingKind
	Claim string // namespace/name of the claim
	Class string // the claim's class
	// RefKind and RefName are the parameters reference's kind and name
	// (MissingClaimParameters, MissingClassParameters).
	RefKind, RefName string
}

// Resolve fills in a Claim for a claim object: its class, the class and
// claim parameters and the vendor snapshots. It looks up all it can and
// returns what is missing in this order: the class, the claim's
// parameters, the class's parameters (looked for only when the class is
// there). The result is nil when nothing is.
func (c *Catalog) Resolve(claim *resourceapi.ResourceClaim) (Claim, []Missing) {
	out := Claim{Claim: claim, Class: c.classes[claim.Spec.ResourceClassName]}
	var missing []Missing
	miss := func(kind MissingKind, refKind, refName string) {
		missing = append(missing, Missing{Kind: kind, Claim: claimKey(claim), Class: claim.Spec.ResourceClassName, RefKind: refKind, RefName: refName})
	}
	if out.Class == nil {
		miss(MissingClass, "", "")
	}
	if ref := claim.Spec.ParametersRef; ref != nil {
		out.ClaimParameters, out.VendorClaimParameters = c.ClaimParameters(claim.Namespace, ref)
		if out.ClaimParameters == nil {
			miss(MissingClaimParameters, ref.Kind, ref.Name)
		}
	}
	if out.Class != nil {
		if ref := out.Class.ParametersRef; ref != nil {
			out.ClassParameters, out.VendorClassParameters = c.ClassParameters(ref)
			if out.ClassParameters == nil {
				miss(MissingClassParameters, ref.Kind, ref.Name)
			}
		}
	}
	return out, missing
}

func isBuiltin(group, kind, want string) bool {
	return kind == want && (group == "" || group == resourceapi.GroupName)
}

// vendorRaw snapshots a vendor object as JSON, or returns nil when the
// catalog does not have it (the parameters' VendorParameters are used).
func (c *Catalog) vendorRaw(k vendorKey) *runtime.RawExtension {
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
