package validation

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
)

// Pod defaults, as in Kubernetes.
const (
	DefaultTerminationGracePeriodSeconds = 30
	DefaultSchedulerName                 = "default-scheduler"
	DefaultDNSPolicy                     = "ClusterFirst"
	DefaultTerminationMessagePath        = "/dev/termination-log"
	DefaultTerminationMessagePolicy      = "File"
	DefaultImagePullPolicy               = corev1.PullPolicy("IfNotPresent")
)

var (
	podPhases        = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}
	conditionStatues = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}
)

// ValidatePodStatusUpdate checks a write to a pod's status: a known phase,
// well-formed conditions (any type), and resourceClaimStatuses that name
// template entries of spec.resourceClaims.
func ValidatePodStatusUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	errs := validateObjectMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta, nameIsDNSSubdomain, metaPath)
	path := field.NewPath("status")
	st := &newPod.Status
	if st.Phase != "" {
		errs = append(errs, supported(path.Child("phase"), st.Phase, podPhases...)...)
	}
	if old := oldPod.Status.Phase; (old == corev1.PodSucceeded || old == corev1.PodFailed) && st.Phase != old {
		errs = append(errs, field.Forbidden(path.Child("phase"), "a pod in phase "+string(old)+" has terminated and may not change phase"))
	}
	for i, c := range st.Conditions {
		errs = append(errs, validateCondition(string(c.Type), c.Status, path.Child("conditions").Index(i))...)
	}
	errs = append(errs, optional(path.Child("nominatedNodeName"), st.NominatedNodeName, dnsSubdomain)...)
	errs = append(errs, validateClaimStatuses(st.ResourceClaimStatuses, newPod.Spec.ResourceClaims, path.Child("resourceClaimStatuses"))...)
	if !apiequality.Semantic.DeepEqual(st.ExtendedResourceClaimStatus, oldPod.Status.ExtendedResourceClaimStatus) {
		errs = append(errs, field.Forbidden(path.Child("extendedResourceClaimStatus"),
			"is recorded by the pod's binding (pods/binding) and may not be changed by a status write"))
	}
	return errs
}

// ValidateExtendedResourceClaimStatus checks the record of the claim made
// for a pod's extended resources served by DRA against the pod: a valid
// claim name, and mappings, each of a container of the pod (init or
// regular) to an extended resource that container requests and a request
// name, at most one per container and resource. The request names are
// the claim's to check.
func ValidateExtendedResourceClaimStatus(st *corev1.PodExtendedResourceClaimStatus, pod *corev1.Pod, path *field.Path) field.ErrorList {
	errs := required(path.Child("resourceClaimName"), st.ResourceClaimName, dnsSubdomain)
	containers := map[string]*corev1.Container{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			containers[cs[i].Name] = &cs[i]
		}
	}
	mp := path.Child("requestMappings")
	if len(st.RequestMappings) == 0 {
		errs = append(errs, field.Required(mp, "the claim serves at least one container's extended resource"))
	}
	var pairs unique
	for i, m := range st.RequestMappings {
		p := mp.Index(i)
		errs = append(errs, required(p.Child("requestName"), m.RequestName, dnsLabel)...)
		c := containers[m.ContainerName]
		switch {
		case m.ContainerName == "":
			errs = append(errs, field.Required(p.Child("containerName"), ""))
			continue
		case c == nil:
			errs = append(errs, field.NotFound(p.Child("containerName"), m.ContainerName))
			continue
		}
		name := corev1.ResourceName(m.ResourceName)
		_, inRequests := c.Resources.Requests[name]
		_, inLimits := c.Resources.Limits[name]
		switch {
		case m.ResourceName == "":
			errs = append(errs, field.Required(p.Child("resourceName"), ""))
		case !IsDRAExtendedResourceName(name):
			errs = append(errs, field.Invalid(p.Child("resourceName"), m.ResourceName,
				"must be an extended resource (example.com/gpu) or deviceclass.resource.kubernetes.io/CLASS"))
		case !inRequests && !inLimits:
			errs = append(errs, field.Invalid(p.Child("resourceName"), m.ResourceName,
				"must be a resource container "+m.ContainerName+" requests"))
		}
		errs = append(errs, pairs.check(m.ContainerName+"\n"+m.ResourceName, p)...)
	}
	return errs
}

func validateCondition(typ string, status corev1.ConditionStatus, path *field.Path) field.ErrorList {
	errs := required(path.Child("type"), typ, nil)
	if status == "" {
		return append(errs, field.Required(path.Child("status"), "must be True, False or Unknown"))
	}
	return append(errs, supported(path.Child("status"), status, conditionStatues...)...)
}

func validateClaimStatuses(statuses []corev1.PodResourceClaimStatus, claims []corev1.PodResourceClaim, path *field.Path) field.ErrorList {
	byName := make(map[string]*corev1.PodResourceClaim, len(claims))
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
	}
	var errs field.ErrorList
	var names unique
	for i, s := range statuses {
		p := path.Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
			continue
		}
		errs = append(errs, names.check(s.Name, p.Child("name"))...)
		switch c := byName[s.Name]; {
		case c == nil:
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, "must be the name of an entry in spec.resourceClaims"))
		case c.ResourceClaimTemplateName == nil:
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, "must name an entry of spec.resourceClaims that uses resourceClaimTemplateName"))
		}
		if s.ResourceClaimName != nil {
			errs = append(errs, required(p.Child("resourceClaimName"), *s.ResourceClaimName, dnsSubdomain)...)
		}
	}
	return errs
}

// DefaultPod fills the defaults Kubernetes applies to a new pod. Requests
// default to limits for resources that have only a limit.
func DefaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		v := int64(DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &v
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = DefaultSchedulerName
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = DefaultDNSPolicy
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = DefaultTerminationMessagePolicy
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultImagePullPolicy
	}
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = limit.DeepCopy()
	}
}
