// Package schedtest builds pods and nodes for the scheduler's tests:
//
//	pod := schedtest.MakePod("a").Req("cpu", "2").Obj()
//	node := schedtest.MakeNode("n").Alloc("cpu", "4").Taint("k", "v", "NoSchedule").Obj()
//
// Nodes are Ready with room for 110 pods unless told otherwise. Pods get
// a UID from their namespace and name. It is imported by tests only.
package schedtest

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// PodBuilder builds a pod with one container.
type PodBuilder struct{ p *corev1.Pod }

// MakePod starts a pod in namespace "default" with schedulerName
// "default-scheduler".
func MakePod(name string) PodBuilder {
	return PodBuilder{&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("default/" + name)},
		Spec: corev1.PodSpec{
			SchedulerName: "default-scheduler",
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}}
}

// Namespace moves the pod (and its UID) to ns.
func (b PodBuilder) Namespace(ns string) PodBuilder {
	b.p.Namespace = ns
	b.p.UID = types.UID(ns + "/" + b.p.Name)
	return b
}

// UID sets the UID.
func (b PodBuilder) UID(uid string) PodBuilder { b.p.UID = types.UID(uid); return b }

// Req adds a request (and, for extended resources, the equal limit) to
// the first container.
func (b PodBuilder) Req(name, qty string) PodBuilder {
	c := &b.p.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[corev1.ResourceName(name)] = resource.MustParse(qty)
	return b
}

// Limit adds a limit to the first container.
func (b PodBuilder) Limit(name, qty string) PodBuilder {
	c := &b.p.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[corev1.ResourceName(name)] = resource.MustParse(qty)
	return b
}

// InitReq adds an init container requesting name=qty.
func (b PodBuilder) InitReq(name, qty string) PodBuilder {
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, corev1.Container{
		Name:      "init",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(qty)}},
	})
	return b
}

// Container adds a container requesting name=qty.
func (b PodBuilder) Container(name, qty string) PodBuilder {
	b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{
		Name:      "c" + string(rune('0'+len(b.p.Spec.Containers))),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(qty)}},
	})
	return b
}

// NodeSelector adds k=v to spec.nodeSelector.
func (b PodBuilder) NodeSelector(k, v string) PodBuilder {
	if b.p.Spec.NodeSelector == nil {
		b.p.Spec.NodeSelector = map[string]string{}
	}
	b.p.Spec.NodeSelector[k] = v
	return b
}

func (b PodBuilder) nodeAffinity() *corev1.NodeAffinity {
	if b.p.Spec.Affinity == nil {
		b.p.Spec.Affinity = &corev1.Affinity{}
	}
	if b.p.Spec.Affinity.NodeAffinity == nil {
		b.p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return b.p.Spec.Affinity.NodeAffinity
}

// RequiredAffinity adds a required node affinity term "key op values".
func (b PodBuilder) RequiredAffinity(key string, op corev1.NodeSelectorOperator, values ...string) PodBuilder {
	na := b.nodeAffinity()
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}},
	})
	return b
}

// PreferredAffinity adds a preferred term: weight for nodes with key=value.
func (b PodBuilder) PreferredAffinity(weight int32, key, value string) PodBuilder {
	na := b.nodeAffinity()
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}},
		}})
	return b
}

// Toleration adds a toleration; op "" is Equal.
func (b PodBuilder) Toleration(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) PodBuilder {
	b.p.Spec.Tolerations = append(b.p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	return b
}

// Claim adds a pod.spec.resourceClaims entry naming the ResourceClaim
// claim.
func (b PodBuilder) Claim(entry, claim string) PodBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimName: &claim})
	return b
}

// ClaimTemplate adds a pod.spec.resourceClaims entry whose claim is made
// from the ResourceClaimTemplate template.
func (b PodBuilder) ClaimTemplate(entry, template string) PodBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: &template})
	return b
}

// Node sets spec.nodeName.
func (b PodBuilder) Node(n string) PodBuilder { b.p.Spec.NodeName = n; return b }

// SchedulerName sets spec.schedulerName.
func (b PodBuilder) SchedulerName(n string) PodBuilder { b.p.Spec.SchedulerName = n; return b }

// Priority sets spec.priority.
func (b PodBuilder) Priority(p int32) PodBuilder { b.p.Spec.Priority = &p; return b }

// Label sets a label.
func (b PodBuilder) Label(k, v string) PodBuilder {
	if b.p.Labels == nil {
		b.p.Labels = map[string]string{}
	}
	b.p.Labels[k] = v
	return b
}

// Phase sets status.phase.
func (b PodBuilder) Phase(p corev1.PodPhase) PodBuilder { b.p.Status.Phase = p; return b }

// Terminating sets a deletionTimestamp.
func (b PodBuilder) Terminating() PodBuilder {
	now := metav1.Now()
	b.p.DeletionTimestamp = &now
	return b
}

// Obj returns the pod.
func (b PodBuilder) Obj() *corev1.Pod { return b.p }

// NodeBuilder builds a node.
type NodeBuilder struct{ n *corev1.Node }

// MakeNode starts a Ready node with allocatable pods=110.
func MakeNode(name string) NodeBuilder {
	return NodeBuilder{&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node/" + name)},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}}
}

// Alloc sets allocatable (and capacity) name=qty.
func (b NodeBuilder) Alloc(name, qty string) NodeBuilder {
	q := resource.MustParse(qty)
	if b.n.Status.Capacity == nil {
		b.n.Status.Capacity = corev1.ResourceList{}
	}
	b.n.Status.Allocatable[corev1.ResourceName(name)] = q
	b.n.Status.Capacity[corev1.ResourceName(name)] = q
	return b
}

// Label sets a label.
func (b NodeBuilder) Label(k, v string) NodeBuilder {
	if b.n.Labels == nil {
		b.n.Labels = map[string]string{}
	}
	b.n.Labels[k] = v
	return b
}

// Taint adds a taint.
func (b NodeBuilder) Taint(key, value string, effect corev1.TaintEffect) NodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}

// Unschedulable cordons the node.
func (b NodeBuilder) Unschedulable() NodeBuilder { b.n.Spec.Unschedulable = true; return b }

// Ready sets the Ready condition's status.
func (b NodeBuilder) Ready(s corev1.ConditionStatus) NodeBuilder {
	b.n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}
	return b
}

// NoConditions removes every condition.
func (b NodeBuilder) NoConditions() NodeBuilder { b.n.Status.Conditions = nil; return b }

// Obj returns the node.
func (b NodeBuilder) Obj() *corev1.Node { return b.n }
