package auth

import (
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Privileged marks: labels, annotations and fields that another component
// trusts to grant power, held so that only the principal they are meant
// for (or an admin) may add, change or remove them. Each is judged on the
// object as written against the object as stored (an empty object for a
// create), never on the request's body, so every write path (create,
// update, every patch format, and any future apply) passes the same check.
// The marks on claims (the delete-protection finalizer and the
// generated-claim annotation) are in userClaimMarks.
const (
	// AdminAccessLabel on a namespace lets its v1 claims ask for admin
	// access to devices, reaching devices other pods hold. Admins' only.
	AdminAccessLabel = resourcev1.DRAAdminNamespaceLabelKey
	// CDIAnnotationPrefix starts the pod annotations in the CDI
	// convention that the node agent turns into devices injected into the
	// pod's containers, bypassing device plugins and DRA. Admins' only.
	CDIAnnotationPrefix = "cdi.k8s.io/"
	// OutOfServiceTaint on a Node is an operator's statement that the
	// node is down. Admins' only.
	OutOfServiceTaint = "node.kubernetes.io/out-of-service"
)

// changedKey returns the first key, in sorted order, that match selects
// and whose presence or value differs between now and before.
func changedKey(now, before map[string]string, match func(string) bool) (string, bool) {
	var keys []string
	for k := range now {
		keys = append(keys, k)
	}
	for k := range before {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !match(k) {
			continue
		}
		v, ok := now[k]
		ov, ook := before[k]
		if v != ov || ok != ook {
			return k, true
		}
	}
	return "", false
}

// writtenAndStored returns the metadata of the object as written and as
// stored (empty for a create) of a create, update or patch.
func writtenAndStored(a Attributes) (now, before metav1.Object, err error) {
	if a.Object == nil {
		return nil, nil, errNoObject
	}
	if now, err = meta.Accessor(a.Object); err != nil {
		return nil, nil, err
	}
	before = &metav1.ObjectMeta{}
	if a.Verb != "create" {
		if a.OldObject == nil {
			return nil, nil, errNoObject
		}
		if before, err = meta.Accessor(a.OldObject); err != nil {
			return nil, nil, err
		}
	}
	return now, before, nil
}

// isWrite reports whether the verb writes an object (create, update or
// patch), the verbs marks are judged on.
func isWrite(verb string) bool {
	return verb == "create" || slices.Contains(updateVerbs, verb)
}

// namespaceMarks denies a create, update or patch of a namespace that
// adds, changes or removes AdminAccessLabel. Only admins hold it.
func namespaceMarks(a Attributes) Decision {
	if !a.is(grNamespaces, "") || !isWrite(a.Verb) {
		return Decision{Allowed: true}
	}
	now, before, err := writtenAndStored(a)
	if err != nil {
		return deny("%s: read namespace: %v", a.User, err)
	}
	if _, changed := changedKey(now.GetLabels(), before.GetLabels(), func(k string) bool { return k == AdminAccessLabel }); changed {
		return deny("%s may not add, change or remove the label %s of namespaces: it lets the namespace's claims ask for admin access to devices other pods hold; only admins set it",
			a.User, AdminAccessLabel)
	}
	return Decision{Allowed: true}
}

// podMarks denies a create, update or patch of a pod that adds, changes
// or removes an annotation starting with CDIAnnotationPrefix. Only admins
// hold them.
func podMarks(a Attributes) Decision {
	if !a.is(grPods, "") || !isWrite(a.Verb) {
		return Decision{Allowed: true}
	}
	now, before, err := writtenAndStored(a)
	if err != nil {
		return deny("%s: read pod: %v", a.User, err)
	}
	isCDI := func(k string) bool { return strings.HasPrefix(k, CDIAnnotationPrefix) }
	if k, changed := changedKey(now.GetAnnotations(), before.GetAnnotations(), isCDI); changed {
		return deny("%s may not add, change or remove the annotation %s of pods (annotations %s*): the node injects the CDI devices they name into the pod's containers, past device plugins and DRA; only admins set them",
			a.User, k, CDIAnnotationPrefix)
	}
	return Decision{Allowed: true}
}

// nodeMarks denies a node's write of its own Node that registers it with
// OutOfServiceTaint or, after registration, changes spec.taints or
// spec.unschedulable: an operator's statements about the node, admins'
// only (as Kubernetes' NodeRestriction keeps a kubelet from changing its
// taints).
func nodeMarks(a Attributes) Decision {
	if !a.is(grNodes, "") || !isWrite(a.Verb) {
		return Decision{Allowed: true}
	}
	n, err := as[corev1.Node](a.Object)
	if err != nil {
		return deny("%s: read new Node: %v", a.User, err)
	}
	if a.Verb == "create" {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == OutOfServiceTaint }) {
			return deny("%s may not register with the taint %s: it is an operator's statement that the node is down; only admins set it",
				a.User, OutOfServiceTaint)
		}
		return Decision{Allowed: true}
	}
	old, err := as[corev1.Node](a.OldObject)
	if err != nil {
		return deny("%s: read stored Node: %v", a.User, err)
	}
	if a.User.Role == RoleControllerManager && nodeLifecycleTaintsOnly(n, old) {
		return Decision{Allowed: true} // the node lifecycle controller's taints
	}
	if !equality.Semantic.DeepEqual(normTaints(n.Spec.Taints), normTaints(old.Spec.Taints)) {
		return deny("%s may not add, change or remove spec.taints of its Node (%s among them): taints are an operator's statements about the node; only admins set them",
			a.User, OutOfServiceTaint)
	}
	if n.Spec.Unschedulable != old.Spec.Unschedulable {
		return deny("%s may not change spec.unschedulable of its Node: cordoning is an operator's statement; only admins set it", a.User)
	}
	return Decision{Allowed: true}
}

// lifecycleTaintKeys are the taints the node lifecycle controller sets and
// clears as a node's Ready condition changes.
var lifecycleTaintKeys = []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady}

// nodeLifecycleTaintsOnly reports whether n differs from old in nothing a
// writer controls but taints with lifecycleTaintKeys: spec (other taints
// included), labels, annotations, owners and finalizers are the same.
func nodeLifecycleTaintsOnly(n, old *corev1.Node) bool {
	strip := func(x *corev1.Node) corev1.Node {
		var y corev1.Node
		y.Spec = *x.Spec.DeepCopy()
		y.Spec.Taints = normTaints(slices.DeleteFunc(y.Spec.Taints, func(t corev1.Taint) bool { return slices.Contains(lifecycleTaintKeys, t.Key) }))
		y.Labels, y.Annotations, y.OwnerReferences, y.Finalizers = x.Labels, x.Annotations, x.OwnerReferences, x.Finalizers
		return y
	}
	return equality.Semantic.DeepEqual(strip(n), strip(old))
}

// normTaints treats nil and empty alike.
func normTaints(t []corev1.Taint) []corev1.Taint {
	if len(t) == 0 {
		return nil
	}
	return t
}

// heldMarks applies the mark rules to a write the role's grants allow.
func heldMarks(a Attributes) Decision {
	for _, check := range []func(Attributes) Decision{namespaceMarks, podMarks, nodeMarks} {
		if d := check(a); !d.Allowed {
			return d
		}
	}
	return Decision{Allowed: true}
}
