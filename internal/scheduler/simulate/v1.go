package simulate

import (
	"slices"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// v1Claims are the simulation's resource.k8s.io/v1 claims: those of the
// input and those generated from v1 templates.
type v1Claims struct {
	templates map[string]*resourcev1.ResourceClaimTemplate // namespace/name
	seedTmpl  map[string]bool                              // v1alpha2 templates, which win a name
	claims    map[string]*resourcev1.ResourceClaim         // namespace/name
}

func newV1Claims(snap *allocator.Snapshot) *v1Claims {
	v := &v1Claims{templates: map[string]*resourcev1.ResourceClaimTemplate{}, seedTmpl: map[string]bool{},
		claims: map[string]*resourcev1.ResourceClaim{}}
	for _, t := range snap.V1ClaimTemplates {
		v.templates[t.Namespace+"/"+t.Name] = t
	}
	for _, t := range snap.ClaimTemplates {
		v.seedTmpl[t.Namespace+"/"+t.Name] = true
	}
	for _, c := range snap.V1Claims {
		v.claims[c.Namespace+"/"+c.Name] = c
	}
	return v
}

// generate is allocator.Simulation.GenerateClaims for the pod's entries
// whose template is a v1 template (and no v1alpha2 one of that name): a
// v1 claim named POD-ENTRY (allocator.NewClaimFromTemplateV1), recorded
// in the pod's status; an existing claim of that name is used as is.
func (v *v1Claims) generate(pod *corev1.Pod) *corev1.Pod {
	out := pod
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil ||
			slices.ContainsFunc(out.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == pc.Name }) {
			continue
		}
		key := pod.Namespace + "/" + *pc.ResourceClaimTemplateName
		tmpl := v.templates[key]
		if tmpl == nil || v.seedTmpl[key] {
			continue
		}
		name := pod.Name + "-" + pc.Name
		if _, exists := v.claims[pod.Namespace+"/"+name]; !exists {
			c := allocator.NewClaimFromTemplateV1(pod, pc.Name, tmpl, name)
			c.TypeMeta = metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaim"}
			v.claims[pod.Namespace+"/"+name] = c
		}
		if out == pod {
			out = pod.DeepCopy()
		}
		out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses,
			corev1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &name})
	}
	return out
}

func (v *v1Claims) list() []*resourcev1.ResourceClaim {
	out := make([]*resourcev1.ResourceClaim, 0, len(v.claims))
	for _, c := range v.claims {
		out = append(out, c)
	}
	return out
}

// adminNamespaces are the input's Namespaces labelled
// resource.kubernetes.io/admin-access=true, whose v1 claims may ask for
// admin access.
func adminNamespaces(objs []runtime.Object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		if ns, ok := o.(*corev1.Namespace); ok && ns.Labels[resourcev1.DRAAdminNamespaceLabelKey] == "true" {
			out[ns.Name] = true
		}
	}
	return out
}

// seedClaims are the v1alpha2 claims without the views of v1 claims the
// plugin keeps among them.
func seedClaims(o *dynamicresources.Objects) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, c := range o.Claims() {
		if !resourceapi.IsView(c) {
			out = append(out, c)
		}
	}
	return out
}

// withV1 adds the pod's v1 claims' answer on a node to the seed answer,
// as the plugin's Filter and Score combine them: the pod fits when both
// fit, and the score is the v1 one, or the mean when the pod has claims
// of both versions.
func withV1(res *allocator.Result, v1 *allocator.V1Result) *allocator.Result {
	if v1 == nil {
		return res
	}
	out := *res
	switch {
	case !v1.Fits:
		out.Fits = false
		out.Reasons = append(slices.Clip(res.Reasons), v1.Reasons...)
	case !res.Fits:
	case len(res.Allocations) == 0:
		out.Score = v1.Score
	default:
		out.Score = (res.Score + v1.Score) / 2
	}
	return &out
}
