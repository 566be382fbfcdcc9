package allocator

import (
	"slices"
	"strconv"

	corev1 "allot.dev/allot/api/core/v1"
)

// MatchNodeSelector reports whether a node selector matches a node. A nil
// selector matches every node; a selector without terms matches none.
// node may be nil, in which case only the name is known (field
// metadata.name) and the node has no labels.
func MatchNodeSelector(sel *corev1.NodeSelector, node *corev1.Node, nodeName string) bool {
	if sel == nil {
		return true
	}
	var labels map[string]string
	if node != nil {
		labels = node.Labels
		nodeName = node.Name
	}
	fields := map[string]string{"metadata.name": nodeName}
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if matchRequirements(term.MatchExpressions, labels) && matchRequirements(term.MatchFields, fields) {
			return true
		}
	}
	return false
}

func matchRequirements(reqs []corev1.NodeSelectorRequirement, values map[string]string) bool {
	for _, r := range reqs {
		v, has := values[r.Key]
		if !matchRequirement(r, v, has) {
			return false
		}
	}
	return true
}

func matchRequirement(r corev1.NodeSelectorRequirement, v string, has bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return got > want
		}
		return got < want
	}
	return false
}
