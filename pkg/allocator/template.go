package allocator

import (
	"hash/fnv"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// The one definition of a claim made from a pod's template: the claim
// controller creates it, the simulation generates it, and the scheduler
// and the API server recognise it (resourceapi.GeneratedFor: the
// annotation resourceapi.PodClaimNameAnnotation naming the entry, and the
// pod as controlling owner).

// GeneratedClaimName is the name of the claim generated for the pod's
// entry: POD-ENTRY-XXXXX, where XXXXX is derived from the pod's UID and the
// entry. A server-generated name would make a create whose answer was
// lost (the API server killed after its commit) impossible to tell from
// one that failed, and its retry would make a second claim; with this name
// the retry finds the first one (AlreadyExists). A pod of the same name
// created later has another UID, so another suffix. The base is cut so the
// name stays a valid DNS subdomain.
func GeneratedClaimName(pod *corev1.Pod, entry string) string {
	const suffixLen, alphabet = 5, "bcdfghjklmnpqrstvwxz2456789" // as generateName's
	h := fnv.New64a()
	_, _ = h.Write([]byte(string(pod.UID) + "/" + entry))
	sum := h.Sum64()
	suffix := make([]byte, suffixLen)
	for i := range suffix {
		suffix[i] = alphabet[sum%uint64(len(alphabet))]
		sum /= uint64(len(alphabet))
	}
	base := pod.Name + "-" + entry + "-"
	if max := validation.DNS1123SubdomainMaxLength - suffixLen; len(base) > max {
		base = base[:max]
	}
	return base + string(suffix)
}

// PodOwnerReference is the controlling owner reference to pod that the
// objects made for it carry (generated claims, scheduling contexts): the
// garbage collector deletes them with it.
func PodOwnerReference(pod *corev1.Pod) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// NewClaimFromTemplate builds the claim generated for the pod's entry from
// its template, named name (the controller uses GeneratedClaimName): in
// the pod's namespace, with the template's labels and annotations, the
// annotation naming the entry, the pod as controlling owner, and a copy of
// the template's spec.
func NewClaimFromTemplate(pod *corev1.Pod, entry string, tmpl *resourceapi.ResourceClaimTemplate, name string) *resourceapi.ResourceClaim {
	annotations := make(map[string]string, len(tmpl.Spec.Annotations)+1)
	for k, v := range tmpl.Spec.Annotations {
		annotations[k] = v
	}
	annotations[resourceapi.PodClaimNameAnnotation] = entry
	var labels map[string]string
	if len(tmpl.Spec.Labels) > 0 {
		labels = make(map[string]string, len(tmpl.Spec.Labels))
		for k, v := range tmpl.Spec.Labels {
			labels[k] = v
		}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       pod.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{PodOwnerReference(pod)},
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
}

// IsPodClaim reports whether claim is the one generated for the pod's
// entry: the pod is its controlling owner and the annotation names entry.
func IsPodClaim(claim *resourceapi.ResourceClaim, pod *corev1.Pod, entry string) bool {
	uid, e, ok := resourceapi.GeneratedFor(claim)
	return ok && uid == pod.UID && e == entry
}

// NewClaimFromTemplateV1 is NewClaimFromTemplate for a resource.k8s.io/v1
// template: a v1 claim (a generated claim's version is its template's)
// with a copy of the template's v1 spec and the metadata NewClaimFromTemplate
// builds, so that claims of the two versions cannot drift apart.
func NewClaimFromTemplateV1(pod *corev1.Pod, entry string, tmpl *resourcev1.ResourceClaimTemplate, name string) *resourcev1.ResourceClaim {
	meta := NewClaimFromTemplate(pod, entry, &resourceapi.ResourceClaimTemplate{
		Spec: resourceapi.ResourceClaimTemplateSpec{ObjectMeta: tmpl.Spec.ObjectMeta},
	}, name).ObjectMeta
	return &resourcev1.ResourceClaim{ObjectMeta: meta, Spec: *tmpl.Spec.Spec.DeepCopy()}
}

// IsPodClaimV1 is IsPodClaim for a resource.k8s.io/v1 claim: only its
// metadata counts.
func IsPodClaimV1(claim *resourcev1.ResourceClaim, pod *corev1.Pod, entry string) bool {
	return IsPodClaim(&resourceapi.ResourceClaim{ObjectMeta: claim.ObjectMeta}, pod, entry)
}
