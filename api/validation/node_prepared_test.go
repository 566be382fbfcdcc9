package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// TestNodePreparedClaims: a node's list of prepared claims names each
// claim once, completely, with its pods, within the limits.
func TestNodePreparedClaims(t *testing.T) {
	ok := corev1.PreparedResourceClaim{Namespace: "ns", Name: "c", UID: "u1", Pods: []types.UID{"p1", "p2"}}
	many := make([]corev1.PreparedResourceClaim, corev1.MaxPreparedResourceClaims+1)
	for i := range many {
		many[i] = ok
	}
	manyPods := make([]types.UID, corev1.MaxPreparedClaimPods+1)
	for i := range manyPods {
		manyPods[i] = types.UID(strings.Repeat("p", i+1))
	}
	for name, tc := range map[string]struct {
		claims []corev1.PreparedResourceClaim
		want   string
	}{
		"valid":         {claims: []corev1.PreparedResourceClaim{ok, {Namespace: "ns", Name: "d", UID: "u2", Pods: []types.UID{"p1"}}}},
		"no uid":        {claims: []corev1.PreparedResourceClaim{{Namespace: "ns", Name: "c", Pods: []types.UID{"p"}}}, want: "status.preparedResourceClaims[0].uid: Required value"},
		"bad namespace": {claims: []corev1.PreparedResourceClaim{{Namespace: "NS", Name: "c", UID: "u", Pods: []types.UID{"p"}}}, want: "status.preparedResourceClaims[0].namespace: Invalid value"},
		"no pods":       {claims: []corev1.PreparedResourceClaim{{Namespace: "ns", Name: "c", UID: "u"}}, want: "status.preparedResourceClaims[0].pods: Required value"},
		"claim twice":   {claims: []corev1.PreparedResourceClaim{ok, ok}, want: "status.preparedResourceClaims[1].uid: Duplicate value"},
		"pod twice":     {claims: []corev1.PreparedResourceClaim{{Namespace: "ns", Name: "c", UID: "u", Pods: []types.UID{"p", "p"}}}, want: "status.preparedResourceClaims[0].pods[1]: Duplicate value"},
		"too many":      {claims: many, want: "status.preparedResourceClaims: Too many"},
		"too many pods": {claims: []corev1.PreparedResourceClaim{{Namespace: "ns", Name: "c", UID: "u", Pods: manyPods}}, want: "status.preparedResourceClaims[0].pods: Too many"},
	} {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{PreparedResourceClaims: tc.claims}}
			errs := ValidateNode(n)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("errors %v, want none", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}
