package validation

import (
	"fmt"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Values of pod fields that allot accepts.
var (
	dnsPolicies       = []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}
	pullPolicies      = []corev1.PullPolicy{"Always", "IfNotPresent", "Never"}
	terminationMsgPol = []string{"File", "FallbackToLogsOnError"}
	protocols         = []string{"TCP", "UDP", "SCTP"}
	restartPolicies   = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
)

// ValidatePod checks a pod being created.
func ValidatePod(pod *corev1.Pod) field.ErrorList {
	errs := validateObjectMeta(&pod.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateFenceAnnotation(pod.Annotations, nil, corev1.AnnotationFence, metaPath.Child("annotations"))...)
	return append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

func validatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	errs, claims := validatePodResourceClaims(spec.ResourceClaims, path.Child("resourceClaims"))
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "a pod needs at least one container"))
	}
	var names unique
	for i := range spec.InitContainers {
		errs = append(errs, validateContainer(&spec.InitContainers[i], path.Child("initContainers").Index(i), &names, claims)...)
	}
	for i := range spec.Containers {
		errs = append(errs, validateContainer(&spec.Containers[i], path.Child("containers").Index(i), &names, claims)...)
	}
	if spec.RestartPolicy != "" {
		errs = append(errs, supported(path.Child("restartPolicy"), spec.RestartPolicy, restartPolicies...)...)
	}
	if spec.TerminationGracePeriodSeconds != nil {
		errs = append(errs, nonNegative(path.Child("terminationGracePeriodSeconds"), *spec.TerminationGracePeriodSeconds)...)
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if spec.DNSPolicy != "" {
		errs = append(errs, supported(path.Child("dnsPolicy"), spec.DNSPolicy, dnsPolicies...)...)
	}
	errs = append(errs, validateNodeSelectorLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	errs = append(errs, optional(path.Child("serviceAccountName"), spec.ServiceAccountName, dnsSubdomain)...)
	errs = append(errs, optional(path.Child("nodeName"), spec.NodeName, dnsSubdomain)...)
	errs = append(errs, optional(path.Child("hostname"), spec.Hostname, dnsLabel)...)
	errs = append(errs, optional(path.Child("schedulerName"), spec.SchedulerName, dnsSubdomain)...)
	errs = append(errs, optional(path.Child("priorityClassName"), spec.PriorityClassName, dnsSubdomain)...)
	errs = append(errs, validateAffinity(spec.Affinity, path.Child("affinity"))...)
	errs = append(errs, validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	return errs
}

// validatePodResourceClaims checks spec.resourceClaims and returns the
// entries by name, for the containers' resources.claims to refer to.
func validatePodResourceClaims(claims []corev1.PodResourceClaim, path *field.Path) (field.ErrorList, map[string]*corev1.PodResourceClaim) {
	if errs := maxItems(path, len(claims), corev1.PodResourceClaimsMaxSize); len(errs) > 0 {
		return errs, nil
	}
	var errs field.ErrorList
	byName := make(map[string]*corev1.PodResourceClaim, len(claims))
	var names unique
	for i := range claims {
		c := &claims[i]
		p := path.Index(i)
		errs = append(errs, required(p.Child("name"), c.Name, dnsLabel)...)
		errs = append(errs, names.check(c.Name, p.Child("name"))...)
		byName[c.Name] = c
		var set []string
		if c.ResourceClaimName != nil {
			set = append(set, "resourceClaimName")
			errs = append(errs, required(p.Child("resourceClaimName"), *c.ResourceClaimName, dnsSubdomain)...)
		}
		if c.ResourceClaimTemplateName != nil {
			set = append(set, "resourceClaimTemplateName")
			errs = append(errs, required(p.Child("resourceClaimTemplateName"), *c.ResourceClaimTemplateName, dnsSubdomain)...)
		}
		errs = append(errs, oneOf(p, []string{"resourceClaimName", "resourceClaimTemplateName"}, set)...)
	}
	return errs, byName
}

func validateContainer(c *corev1.Container, path *field.Path, names *unique, claims map[string]*corev1.PodResourceClaim) field.ErrorList {
	errs := required(path.Child("name"), c.Name, dnsLabel)
	if c.Name != "" {
		errs = append(errs, names.check(c.Name, path.Child("name"))...)
	}
	errs = append(errs, required(path.Child("image"), c.Image, nil)...)
	if c.ImagePullPolicy != "" {
		errs = append(errs, supported(path.Child("imagePullPolicy"), c.ImagePullPolicy, pullPolicies...)...)
	}
	if c.TerminationMessagePolicy != "" {
		errs = append(errs, supported(path.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, terminationMsgPol...)...)
	}
	for i := range c.Ports {
		errs = append(errs, validatePort(&c.Ports[i], path.Child("ports").Index(i))...)
	}
	for i := range c.Env {
		errs = append(errs, validateEnvVar(&c.Env[i], path.Child("env").Index(i))...)
	}
	errs = append(errs, validateResources(&c.Resources, path.Child("resources"))...)
	if e := maxItems(path.Child("resources", "claims"), len(c.Resources.Claims), corev1.PodResourceClaimsMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	var used unique
	for i, rc := range c.Resources.Claims {
		p := path.Child("resources", "claims").Index(i)
		if rc.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
			continue
		}
		errs = append(errs, used.check(rc.Name, p.Child("name"))...)
		if claims != nil && claims[rc.Name] == nil { // nil: too many entries to check against
			errs = append(errs, field.Invalid(p.Child("name"), rc.Name, "must be the name of an entry in spec.resourceClaims"))
		}
	}
	return errs
}

func validatePort(port *corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Name != "" {
		errs = append(errs, invalidAll(path.Child("name"), port.Name, utilvalidation.IsValidPortName(port.Name))...)
	}
	if port.ContainerPort < 1 || port.ContainerPort > 65535 {
		errs = append(errs, field.Invalid(path.Child("containerPort"), port.ContainerPort, "must be between 1 and 65535, inclusive"))
	}
	if port.HostPort < 0 || port.HostPort > 65535 {
		errs = append(errs, field.Invalid(path.Child("hostPort"), port.HostPort, "must be between 0 and 65535, inclusive"))
	}
	if port.Protocol != "" {
		errs = append(errs, supported(path.Child("protocol"), port.Protocol, protocols...)...)
	}
	return errs
}

func validateEnvVar(env *corev1.EnvVar, path *field.Path) field.ErrorList {
	errs := required(path.Child("name"), env.Name, func(p *field.Path, v string) field.ErrorList {
		return invalidAll(p, v, utilvalidation.IsEnvVarName(v))
	})
	if env.ValueFrom == nil {
		return errs
	}
	if env.Value != "" {
		errs = append(errs, field.Invalid(path.Child("valueFrom"), omit, "may not be specified when `value` is not empty"))
	}
	if env.ValueFrom.FieldRef == nil {
		return append(errs, field.Required(path.Child("valueFrom", "fieldRef"), "the only supported source is fieldRef"))
	}
	return append(errs, required(path.Child("valueFrom", "fieldRef", "fieldPath"), env.ValueFrom.FieldRef.FieldPath, nil)...)
}

// validateNodeSelectorLabels checks spec.nodeSelector as labels.
func validateNodeSelectorLabels(sel map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(sel) {
		errs = append(errs, invalidAll(path, k, content.IsLabelKey(k))...)
		errs = append(errs, labelValue(path.Key(k), sel[k])...)
	}
	return errs
}

// ValidatePodUpdate checks a write to a pod. The spec is immutable except
// activeDeadlineSeconds (may be set, or lowered) and tolerations (may only
// be added); the node is set through a Binding, never by an update.
func ValidatePodUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateObjectMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateFenceAnnotation(newPod.Annotations, oldPod.Annotations, corev1.AnnotationFence, metaPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&newPod.Spec, specPath)...)
	newAD, oldAD := newPod.Spec.ActiveDeadlineSeconds, oldPod.Spec.ActiveDeadlineSeconds
	if oldAD != nil && (newAD == nil || *newAD > *oldAD) {
		errs = append(errs, field.Forbidden(specPath.Child("activeDeadlineSeconds"), fmt.Sprintf("may not be removed or raised above %d once set", *oldAD)))
	}
	errs = append(errs, tolerationsOnlyAdded(newPod.Spec.Tolerations, oldPod.Spec.Tolerations, specPath.Child("tolerations"))...)
	munged := newPod.Spec
	munged.ActiveDeadlineSeconds = oldPod.Spec.ActiveDeadlineSeconds
	munged.Tolerations = oldPod.Spec.Tolerations
	if len(immutable(munged, oldPod.Spec, specPath)) > 0 {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than `spec.activeDeadlineSeconds` and `spec.tolerations` (additions only); the node is set through a Binding"))
	}
	return errs
}
