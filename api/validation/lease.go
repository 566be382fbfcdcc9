package validation

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxLeaseHolderIdentityLength bounds a Lease's holderIdentity and
// preferredHolder. Kubernetes sets no bound of its own; client-go's leader
// election writes hostname_UUID, far below it.
const MaxLeaseHolderIdentityLength = 1024

// ValidateLease checks a new coordination.k8s.io/v1 Lease, as Kubernetes
// does: leaseDurationSeconds positive, leaseTransitions not negative, a
// preferredHolder only with a strategy, and the one strategy Kubernetes
// knows.
func ValidateLease(l *coordinationv1.Lease) field.ErrorList {
	errs := validateObjectMeta(&l.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateLeaseSpec(&l.Spec, field.NewPath("spec"))...)
}

// ValidateLeaseUpdate checks a write to a Lease; its spec is mutable.
func ValidateLeaseUpdate(l, old *coordinationv1.Lease) field.ErrorList {
	errs := validateObjectMetaUpdate(&l.ObjectMeta, &old.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateLeaseSpec(&l.Spec, field.NewPath("spec"))...)
}

func validateLeaseSpec(s *coordinationv1.LeaseSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), *s.LeaseDurationSeconds, "must be greater than 0"))
	}
	if s.LeaseTransitions != nil && *s.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(path.Child("leaseTransitions"), *s.LeaseTransitions, "must be greater than or equal to 0"))
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"holderIdentity", s.HolderIdentity}, {"preferredHolder", s.PreferredHolder}} {
		if f.v != nil && len(*f.v) > MaxLeaseHolderIdentityLength {
			errs = append(errs, field.TooLong(path.Child(f.name), "", MaxLeaseHolderIdentityLength))
		}
	}
	if s.Strategy != nil && *s.Strategy != coordinationv1.OldestEmulationVersion {
		errs = append(errs, field.NotSupported(path.Child("strategy"), *s.Strategy, []string{string(coordinationv1.OldestEmulationVersion)}))
	}
	if s.PreferredHolder != nil && *s.PreferredHolder != "" && (s.Strategy == nil || *s.Strategy == "") {
		errs = append(errs, field.Forbidden(path.Child("preferredHolder"), "may only be set with a strategy"))
	}
	return errs
}
