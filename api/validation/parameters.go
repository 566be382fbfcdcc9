package validation

import (
	"fmt"
	"sync/atomic"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SelectorCompiler compiles a structured-parameter selector (a CEL
// expression) and returns why it does not compile. It must be safe for
// concurrent use.
type SelectorCompiler func(expr string) error

// Options tune the validation of parameter objects.
type Options struct {
	// CompileSelector compiles selectors. Nil means the compiler set with
	// SetSelectorCompiler, if any.
	CompileSelector SelectorCompiler
}

var defaultCompiler atomic.Pointer[SelectorCompiler]

// SetSelectorCompiler sets the compiler that ValidateResourceClaimParameters
// and ValidateResourceClassParameters use. Nil removes it; then selectors
// are only checked to be non-empty. The allocator installs its CEL compiler
// at startup.
func SetSelectorCompiler(c SelectorCompiler) {
	if c == nil {
		defaultCompiler.Store(nil)
		return
	}
	defaultCompiler.Store(&c)
}

func (o Options) compiler() SelectorCompiler {
	if o.CompileSelector != nil {
		return o.CompileSelector
	}
	if c := defaultCompiler.Load(); c != nil {
		return *c
	}
	return nil
}

// compileSelector checks that a selector is set and compiles. A panicking
// compiler is reported as an internal error rather than crashing the
// caller.
func compileSelector(expr string, compile SelectorCompiler, path *field.Path) (errs field.ErrorList) {
	if expr == "" {
		return field.ErrorList{field.Required(path, "a CEL expression over the instance's attributes is required")}
	}
	if compile == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			errs = field.ErrorList{field.InternalError(path, fmt.Errorf("selector compiler panicked: %v", r))}
		}
	}()
	if err := compile(expr); err != nil {
		return field.ErrorList{field.Invalid(path, abbreviate(expr, maxEchoedValue), "does not compile: "+abbreviate(err.Error(), maxEchoedError))}
	}
	return nil
}

var requestModels = []string{"partitionable"}

// ValidateResourceClaimParameters checks claim parameters with the
// selector compiler set by SetSelectorCompiler.
func ValidateResourceClaimParameters(p *resourcev1alpha2.ResourceClaimParameters) field.ErrorList {
	return ValidateResourceClaimParametersWith(p, Options{})
}

// ValidateResourceClaimParametersWith checks claim parameters: generatedFrom
// complete when set, and each request names a driver and holds exactly one
// model whose selectors compile. No requests at all is allowed: such a
// claim needs nothing.
func ValidateResourceClaimParametersWith(p *resourcev1alpha2.ResourceClaimParameters, opts Options) field.ErrorList {
	errs := validateObjectMeta(&p.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateClaimParametersFields(p, opts)...)
}

func validateClaimParametersFields(p *resourcev1alpha2.ResourceClaimParameters, opts Options) field.ErrorList {
	var errs field.ErrorList
	if ref := p.GeneratedFrom; ref != nil {
		errs = append(errs, validateParametersRef(ref.APIGroup, ref.Kind, ref.Name, field.NewPath("generatedFrom"))...)
	}
	if e := maxItems(field.NewPath("requests"), len(p.Requests), resourcev1alpha2.ClaimParametersRequestsMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	compile := opts.compiler()
	for i := range p.Requests {
		errs = append(errs, validateRequest(&p.Requests[i], field.NewPath("requests").Index(i), compile)...)
	}
	return errs
}

func validateRequest(r *resourcev1alpha2.ResourceRequest, path *field.Path, compile SelectorCompiler) field.ErrorList {
	errs := required(path.Child("driverName"), r.DriverName, dnsSubdomain)
	var set []string
	if r.Partitionable != nil {
		set = append(set, "partitionable")
	}
	if errs1 := oneOf(path, requestModels, set); len(errs1) > 0 {
		return append(errs, errs1...)
	}
	rp := path.Child("partitionable", "required")
	if len(r.Partitionable.Required) == 0 {
		return append(errs, field.Required(rp, "must list at least one required instance"))
	}
	if e := maxItems(rp, len(r.Partitionable.Required), resourcev1alpha2.RequiredMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	var names unique
	for i, req := range r.Partitionable.Required {
		p := rp.Index(i)
		if req.Name != "" {
			errs = append(errs, dnsSubdomain(p.Child("name"), req.Name)...)
			errs = append(errs, names.check(req.Name, p.Child("name"))...)
		}
		errs = append(errs, compileSelector(req.Selector, compile, p.Child("selector"))...)
	}
	return errs
}

// ValidateResourceClaimParametersUpdate checks a write to claim parameters.
func ValidateResourceClaimParametersUpdate(newP, oldP *resourcev1alpha2.ResourceClaimParameters) field.ErrorList {
	errs := validateObjectMetaUpdate(&newP.ObjectMeta, &oldP.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateClaimParametersFields(newP, Options{})...)
}

// ValidateResourceClassParameters checks class parameters with the
// selector compiler set by SetSelectorCompiler.
func ValidateResourceClassParameters(p *resourcev1alpha2.ResourceClassParameters) field.ErrorList {
	return ValidateResourceClassParametersWith(p, Options{})
}

// ValidateResourceClassParametersWith checks class parameters: generatedFrom
// complete when set, and each filter names a driver and holds exactly one
// model whose selector compiles.
func ValidateResourceClassParametersWith(p *resourcev1alpha2.ResourceClassParameters, opts Options) field.ErrorList {
	errs := validateObjectMeta(&p.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateClassParametersFields(p, opts)...)
}

func validateClassParametersFields(p *resourcev1alpha2.ResourceClassParameters, opts Options) field.ErrorList {
	var errs field.ErrorList
	if ref := p.GeneratedFrom; ref != nil {
		gp := field.NewPath("generatedFrom")
		errs = append(errs, validateParametersRef(ref.APIGroup, ref.Kind, ref.Name, gp)...)
		errs = append(errs, optional(gp.Child("namespace"), ref.Namespace, dnsLabel)...)
	}
	if e := maxItems(field.NewPath("filters"), len(p.Filters), resourcev1alpha2.ClassParametersFiltersMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	compile := opts.compiler()
	for i, f := range p.Filters {
		fp := field.NewPath("filters").Index(i)
		errs = append(errs, required(fp.Child("driverName"), f.DriverName, dnsSubdomain)...)
		var set []string
		if f.Partitionable != nil {
			set = append(set, "partitionable")
		}
		if errs1 := oneOf(fp, requestModels, set); len(errs1) > 0 {
			errs = append(errs, errs1...)
			continue
		}
		errs = append(errs, compileSelector(f.Partitionable.Selector, compile, fp.Child("partitionable", "selector"))...)
	}
	return errs
}

// ValidateResourceClassParametersUpdate checks a write to class parameters.
func ValidateResourceClassParametersUpdate(newP, oldP *resourcev1alpha2.ResourceClassParameters) field.ErrorList {
	errs := validateObjectMetaUpdate(&newP.ObjectMeta, &oldP.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateClassParametersFields(newP, Options{})...)
}
