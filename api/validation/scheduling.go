package validation

import (
	"strconv"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	selectorOps    = []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt}
	fieldOps       = []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn}
	taintEffects   = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	tolerationOps  = []corev1.TolerationOperator{corev1.TolerationOpExists, corev1.TolerationOpEqual}
	nodeFieldNames = []string{"metadata.name"}
)

// validateNodeSelector checks a required node selector: at least one term,
// each requirement with a valid operator and values.
func validateNodeSelector(sel *corev1.NodeSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	termsPath := path.Child("nodeSelectorTerms")
	if len(sel.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i := range sel.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(&sel.NodeSelectorTerms[i], termsPath.Index(i))...)
	}
	return errs
}

func validateNodeSelectorTerm(term *corev1.NodeSelectorTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, req := range term.MatchExpressions {
		errs = append(errs, validateNodeSelectorRequirement(req, path.Child("matchExpressions").Index(i))...)
	}
	for i, req := range term.MatchFields {
		errs = append(errs, validateNodeFieldRequirement(req, path.Child("matchFields").Index(i))...)
	}
	return errs
}

// validateNodeSelectorRequirement: In/NotIn need values, Exists and
// DoesNotExist take none, Gt/Lt take exactly one integer.
func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	errs := required(path.Child("key"), req.Key, qualifiedName)
	valuesPath := path.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(valuesPath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(valuesPath, "must be specified as a single value when `operator` is 'Lt' or 'Gt'"))
		} else if _, err := strconv.ParseInt(req.Values[0], 10, 64); err != nil {
			errs = append(errs, field.Invalid(valuesPath.Index(0), req.Values[0], "must be an integer when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		return append(errs, supported(path.Child("operator"), req.Operator, selectorOps...)...)
	}
	for i, v := range req.Values {
		errs = append(errs, labelValue(valuesPath.Index(i), v)...)
	}
	return errs
}

// validateNodeFieldRequirement: only metadata.name, with In or NotIn and
// exactly one value.
func validateNodeFieldRequirement(req corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	errs := supported(path.Child("key"), req.Key, nodeFieldNames...)
	errs = append(errs, supported(path.Child("operator"), req.Operator, fieldOps...)...)
	if len(req.Values) != 1 {
		errs = append(errs, field.Required(path.Child("values"), "must have exactly one value for a field requirement"))
	}
	return errs
}

func validateAffinity(a *corev1.Affinity, path *field.Path) field.ErrorList {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	na, p := a.NodeAffinity, path.Child("nodeAffinity")
	errs := validateNodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, p.Child("requiredDuringSchedulingIgnoredDuringExecution"))
	for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if term.Weight < 1 || term.Weight > 100 {
			errs = append(errs, field.Invalid(tp.Child("weight"), term.Weight, "must be between 1 and 100, inclusive"))
		}
		errs = append(errs, validateNodeSelectorTerm(&term.Preference, tp.Child("preference"))...)
	}
	return errs
}

// validateTolerations follows Kubernetes: an empty key needs operator
// Exists, Exists takes no value, tolerationSeconds only with NoExecute.
func validateTolerations(tols []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tols {
		p := path.Index(i)
		errs = append(errs, optional(p.Child("key"), t.Key, qualifiedName)...)
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), string(t.Operator), "must be 'Exists' when `key` is empty, which means \"match all values and all keys\""))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			errs = append(errs, labelValue(p.Child("value"), t.Value)...)
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, supported(p.Child("operator"), t.Operator, tolerationOps...)...)
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(p.Child("effect"), string(t.Effect), "must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		if t.Effect != "" {
			errs = append(errs, supported(p.Child("effect"), t.Effect, taintEffects...)...)
		}
	}
	return errs
}

// tolerationsOnlyAdded checks that an update keeps every old toleration.
func tolerationsOnlyAdded(newT, oldT []corev1.Toleration, path *field.Path) field.ErrorList {
	kept := make(map[string]bool, len(newT))
	for _, t := range newT {
		kept[tolerationKey(t)] = true
	}
	for i, t := range oldT {
		if !kept[tolerationKey(t)] {
			return field.ErrorList{field.Forbidden(path, "existing tolerations may not be changed or removed, only new ones added (former entry "+strconv.Itoa(i)+" is missing)")}
		}
	}
	return nil
}

func tolerationKey(t corev1.Toleration) string {
	secs := "-"
	if t.TolerationSeconds != nil {
		secs = strconv.FormatInt(*t.TolerationSeconds, 10)
	}
	return strings.Join([]string{t.Key, string(t.Operator), t.Value, string(t.Effect), secs}, "\x00")
}

// validateTaints: key a qualified name, value a label value, effect one of
// the known effects, no two taints with the same key and effect.
func validateTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var seen unique
	for i, t := range taints {
		p := path.Index(i)
		errs = append(errs, required(p.Child("key"), t.Key, qualifiedName)...)
		errs = append(errs, labelValue(p.Child("value"), t.Value)...)
		if t.Effect == "" {
			errs = append(errs, field.Required(p.Child("effect"), ""))
		} else {
			errs = append(errs, supported(p.Child("effect"), t.Effect, taintEffects...)...)
		}
		if dup := seen.check(t.Key+"\x00"+string(t.Effect), p); len(dup) > 0 {
			errs = append(errs, field.Duplicate(p, t.Key+":"+string(t.Effect)))
		}
	}
	return errs
}
