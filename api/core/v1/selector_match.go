package v1

import (
	"strconv"
)

// Matches reports whether the node selector matches a node: any term
// matches, and a term matches when all its requirements do. A nil selector
// matches every node; a selector without terms matches none.
func (s *NodeSelector) Matches(nodeName string, nodeLabels map[string]string) bool {
	if s == nil {
		return true
	}
	for _, t := range s.NodeSelectorTerms {
		if t.Matches(nodeName, nodeLabels) {
			return true
		}
	}
	return false
}

// Matches reports whether every requirement of the term holds. A term
// without requirements matches nothing, as in Kubernetes.
func (t *NodeSelectorTerm) Matches(nodeName string, nodeLabels map[string]string) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for _, r := range t.MatchExpressions {
		v, ok := nodeLabels[r.Key]
		if !r.matchesValue(v, ok) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		if r.Key != "metadata.name" || !r.matchesValue(nodeName, true) {
			return false
		}
	}
	return true
}

func (r *NodeSelectorRequirement) matchesValue(v string, present bool) bool {
	switch r.Operator {
	case NodeSelectorOpIn:
		return present && contains(r.Values, v)
	case NodeSelectorOpNotIn:
		return !present || !contains(r.Values, v)
	case NodeSelectorOpExists:
		return present
	case NodeSelectorOpDoesNotExist:
		return !present
	case NodeSelectorOpGt, NodeSelectorOpLt:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
