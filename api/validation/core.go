package validation

import (
	"strconv"
	"strings"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Event limits.
const (
	EventReasonMaxLength  = 1024
	EventMessageMaxLength = 4096
)

var (
	namespacePhases = []corev1.NamespacePhase{corev1.NamespaceActive, corev1.NamespaceTerminating}
	eventTypes      = []string{corev1.EventTypeNormal, corev1.EventTypeWarning}
)

// ValidateNamespace checks a namespace: its name is a DNS-1123 label and
// its spec finalizers are qualified names.
func ValidateNamespace(ns *corev1.Namespace) field.ErrorList {
	errs := validateObjectMeta(&ns.ObjectMeta, nameIsDNSLabel, metaPath)
	return append(errs, validateNamespaceSpec(&ns.Spec)...)
}

func validateNamespaceSpec(spec *corev1.NamespaceSpec) field.ErrorList {
	var errs field.ErrorList
	for i, f := range spec.Finalizers {
		errs = append(errs, required(field.NewPath("spec", "finalizers").Index(i), string(f), qualifiedName)...)
	}
	return errs
}

// ValidateNamespaceUpdate checks a write to a namespace.
func ValidateNamespaceUpdate(newNS, oldNS *corev1.Namespace) field.ErrorList {
	errs := validateObjectMetaUpdate(&newNS.ObjectMeta, &oldNS.ObjectMeta, nameIsDNSLabel, metaPath)
	return append(errs, validateNamespaceSpec(&newNS.Spec)...)
}

// ValidateNamespaceStatusUpdate checks a write to a namespace's status.
func ValidateNamespaceStatusUpdate(newNS, oldNS *corev1.Namespace) field.ErrorList {
	errs := validateObjectMetaUpdate(&newNS.ObjectMeta, &oldNS.ObjectMeta, nameIsDNSLabel, metaPath)
	if newNS.Status.Phase != "" {
		errs = append(errs, supported(field.NewPath("status", "phase"), newNS.Status.Phase, namespacePhases...)...)
	}
	return errs
}

// DefaultNamespace sets status.phase to Active.
func DefaultNamespace(ns *corev1.Namespace) {
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// ValidateNode checks a node: taints, and the status a node agent reports
// at registration.
func ValidateNode(node *corev1.Node) field.ErrorList {
	errs := validateObjectMeta(&node.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateFenceAnnotation(node.Annotations, nil, corev1.AnnotationSelfFenceAfter, metaPath.Child("annotations"))...)
	errs = append(errs, validateTaints(node.Spec.Taints, field.NewPath("spec", "taints"))...)
	return append(errs, validateNodeStatus(&node.Status, field.NewPath("status"))...)
}

// ValidateNodeUpdate checks a write to a node.
func ValidateNodeUpdate(newNode, oldNode *corev1.Node) field.ErrorList {
	errs := validateObjectMetaUpdate(&newNode.ObjectMeta, &oldNode.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateFenceAnnotation(newNode.Annotations, oldNode.Annotations, corev1.AnnotationSelfFenceAfter, metaPath.Child("annotations"))...)
	errs = append(errs, validateTaints(newNode.Spec.Taints, field.NewPath("spec", "taints"))...)
	return append(errs, validateNodeStatus(&newNode.Status, field.NewPath("status"))...)
}

// ValidateNodeStatusUpdate checks a write to a node's status.
func ValidateNodeStatusUpdate(newNode, oldNode *corev1.Node) field.ErrorList {
	errs := validateObjectMetaUpdate(&newNode.ObjectMeta, &oldNode.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateNodeStatus(&newNode.Status, field.NewPath("status"))...)
}

func validateNodeStatus(st *corev1.NodeStatus, path *field.Path) field.ErrorList {
	errs := validateResourceList(st.Capacity, path.Child("capacity"))
	errs = append(errs, validateResourceList(st.Allocatable, path.Child("allocatable"))...)
	var types unique
	for i, c := range st.Conditions {
		p := path.Child("conditions").Index(i)
		errs = append(errs, validateCondition(string(c.Type), c.Status, p)...)
		if c.Type != "" {
			errs = append(errs, types.check(string(c.Type), p.Child("type"))...)
		}
	}
	for i, a := range st.Addresses {
		p := path.Child("addresses").Index(i)
		errs = append(errs, required(p.Child("type"), string(a.Type), nil)...)
		errs = append(errs, required(p.Child("address"), a.Address, nil)...)
	}
	return append(errs, validatePreparedClaims(st.PreparedResourceClaims, path.Child("preparedResourceClaims"))...)
}

// validatePreparedClaims checks a node's list of prepared claims: each
// names a claim (namespace, name, uid) once, with at least one pod, each
// pod once, within the limits.
func validatePreparedClaims(claims []corev1.PreparedResourceClaim, path *field.Path) field.ErrorList {
	errs := maxItems(path, len(claims), corev1.MaxPreparedResourceClaims)
	if len(errs) > 0 {
		return errs
	}
	var uids unique
	for i, c := range claims {
		p := path.Index(i)
		errs = append(errs, required(p.Child("namespace"), c.Namespace, dnsLabel)...)
		errs = append(errs, required(p.Child("name"), c.Name, dnsSubdomain)...)
		errs = append(errs, required(p.Child("uid"), string(c.UID), nil)...)
		if c.UID != "" {
			errs = append(errs, uids.check(string(c.UID), p.Child("uid"))...)
		}
		pp := p.Child("pods")
		if len(c.Pods) == 0 {
			errs = append(errs, field.Required(pp, "a prepared claim lists the pods it is prepared for"))
		}
		errs = append(errs, maxItems(pp, len(c.Pods), corev1.MaxPreparedClaimPods)...)
		var pods unique
		for j, uid := range c.Pods {
			errs = append(errs, required(pp.Index(j), string(uid), nil)...)
			if uid != "" {
				errs = append(errs, pods.check(string(uid), pp.Index(j))...)
			}
		}
	}
	return errs
}

// ValidateEvent checks an event: it names the object it is about, and its
// type, reason and message are within bounds.
func ValidateEvent(ev *corev1.Event) field.ErrorList {
	errs := validateObjectMeta(&ev.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateEventFields(ev)...)
}

func validateEventFields(ev *corev1.Event) field.ErrorList {
	p := field.NewPath("involvedObject")
	var errs field.ErrorList
	errs = append(errs, required(p.Child("kind"), ev.InvolvedObject.Kind, nil)...)
	errs = append(errs, required(p.Child("name"), ev.InvolvedObject.Name, nil)...)
	errs = append(errs, optional(p.Child("namespace"), ev.InvolvedObject.Namespace, dnsLabel)...)
	if ev.Type != "" {
		errs = append(errs, supported(field.NewPath("type"), ev.Type, eventTypes...)...)
	}
	errs = append(errs, maxLen(field.NewPath("reason"), ev.Reason, EventReasonMaxLength)...)
	errs = append(errs, maxLen(field.NewPath("message"), ev.Message, EventMessageMaxLength)...)
	errs = append(errs, nonNegative(field.NewPath("count"), int64(ev.Count))...)
	return errs
}

// ValidateEventUpdate checks a write to an event; the object it is about
// may not change.
func ValidateEventUpdate(newEv, oldEv *corev1.Event) field.ErrorList {
	errs := validateObjectMetaUpdate(&newEv.ObjectMeta, &oldEv.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateEventFields(newEv)...)
	return append(errs, immutable(newEv.InvolvedObject, oldEv.InvolvedObject, field.NewPath("involvedObject"))...)
}

// ValidateResourceQuota checks a quota: valid resource names (standard
// names, count/<resource>.<group>, CLASS.resourceclass.resource.k8s.io/
// resourceclaims, extended resources) and non-negative quantities.
func ValidateResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	errs := validateObjectMeta(&q.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateQuotaList(q.Spec.Hard, field.NewPath("spec", "hard"))...)
}

// ValidateResourceQuotaUpdate checks a write to a quota.
func ValidateResourceQuotaUpdate(newQ, oldQ *corev1.ResourceQuota) field.ErrorList {
	errs := validateObjectMetaUpdate(&newQ.ObjectMeta, &oldQ.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateQuotaList(newQ.Spec.Hard, field.NewPath("spec", "hard"))...)
}

// ValidateResourceQuotaStatusUpdate checks a write to a quota's status.
func ValidateResourceQuotaStatusUpdate(newQ, oldQ *corev1.ResourceQuota) field.ErrorList {
	errs := validateObjectMetaUpdate(&newQ.ObjectMeta, &oldQ.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateQuotaList(newQ.Status.Hard, field.NewPath("status", "hard"))...)
	return append(errs, validateQuotaList(newQ.Status.Used, field.NewPath("status", "used"))...)
}

// standardQuotaResources are the quota names without a "/".
var standardQuotaResources = map[string]bool{
	"pods": true, "services": true, "replicationcontrollers": true, "resourcequotas": true,
	"secrets": true, "configmaps": true, "persistentvolumeclaims": true,
	"services.nodeports": true, "services.loadbalancers": true,
	"cpu": true, "memory": true, "ephemeral-storage": true, "storage": true,
	"requests.cpu": true, "requests.memory": true, "requests.storage": true, "requests.ephemeral-storage": true,
	"limits.cpu": true, "limits.memory": true, "limits.ephemeral-storage": true,
}

func validateQuotaList(list corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(list) {
		p := path.Key(string(name))
		errs = append(errs, validateQuotaResourceName(string(name), p)...)
		if qe := nonNegativeQuantity(p, list[name]); len(qe) > 0 {
			errs = append(errs, qe...)
		} else {
			errs = append(errs, quantityInBounds(p, name, list[name])...)
		}
	}
	return errs
}

func validateQuotaResourceName(name string, path *field.Path) field.ErrorList {
	if errs := qualifiedName(path, name); len(errs) > 0 {
		return errs
	}
	hugePages := strings.HasPrefix(name, "hugepages-") || strings.HasPrefix(name, "requests.hugepages-")
	if !strings.Contains(name, "/") && !standardQuotaResources[name] && !hugePages {
		return field.ErrorList{field.Invalid(path, name, "must be a standard quota resource (pods, cpu, requests.memory, ...), count/<resource>[.<group>], <class>.resourceclass.resource.k8s.io/resourceclaims, or an extended resource with a domain")}
	}
	return nil
}

// validateFenceAnnotation checks a fence annotation (key) when present: a
// Node's fence time must be a positive Go duration, a pod's opt-in a
// boolean. A value the stored object (old; nil on create) already has is
// kept, so an object stored before the check can still be written.
func validateFenceAnnotation(annotations, old map[string]string, key string, path *field.Path) field.ErrorList {
	v, ok := annotations[key]
	if !ok {
		return nil
	}
	if ov, had := old[key]; had && ov == v {
		return nil
	}
	p := path.Key(key)
	switch key {
	case corev1.AnnotationSelfFenceAfter:
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return field.ErrorList{field.Invalid(p, v, "must be a positive duration such as 20s (the node's fence time)")}
		}
	case corev1.AnnotationFence:
		if _, err := strconv.ParseBool(v); err != nil {
			return field.ErrorList{field.Invalid(p, v, `must be "true" or "false"`)}
		}
	}
	return nil
}
