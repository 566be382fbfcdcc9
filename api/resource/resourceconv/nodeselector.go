package resourceconv

import (
	kcorev1 "k8s.io/api/core/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// NodeSelectorFromKube reads a Kubernetes node selector as allot's, whose
// Matches has the same semantics (terms ORed, requirements ANDed): the
// same fields and JSON form, copied field by field. The values' slices are
// shared with s, not copied: the result is for reading (matching,
// validating) while s is.
func NodeSelectorFromKube(s *kcorev1.NodeSelector) *corev1.NodeSelector {
	if s == nil {
		return nil
	}
	out := &corev1.NodeSelector{NodeSelectorTerms: make([]corev1.NodeSelectorTerm, len(s.NodeSelectorTerms))}
	for i, t := range s.NodeSelectorTerms {
		out.NodeSelectorTerms[i] = corev1.NodeSelectorTerm{MatchExpressions: requirementsFromKube(t.MatchExpressions), MatchFields: requirementsFromKube(t.MatchFields)}
	}
	return out
}

func requirementsFromKube(in []kcorev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	if in == nil {
		return nil
	}
	out := make([]corev1.NodeSelectorRequirement, len(in))
	for i, r := range in {
		out[i] = corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values}
	}
	return out
}
