package simulate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

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

// deviceTaints lists the taints the snapshot's DeviceTaintRules put on
// its devices of both APIs, by device, rules in name order.
func deviceTaints(snap *allocator.Snapshot) []string {
	if len(snap.TaintRules) == 0 {
		return nil
	}
	rules := slices.Clone(snap.TaintRules)
	slices.SortFunc(rules, func(a, b *resourcev1.DeviceTaintRule) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for _, p := range allocator.NewInventory(snap.V1Slices, snap.Slices).Pools() {
		for _, d := range p.Devices {
			for _, r := range rules {
				if allocator.TaintRuleSelects(r, p.Driver, p.Name, d.Name) {
					t := allocator.DeviceRuleTaint{Rule: r.Name, Taint: r.Spec.Taint}
					out = append(out, fmt.Sprintf("%s/%s/%s: %s", p.Driver, p.Name, d.Name, t))
				}
			}
		}
	}
	return out
}
