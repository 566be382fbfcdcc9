package v1

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true

// Node is a machine that runs pods, registered by its node agent.
type Node struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeSpec   `json:"spec,omitempty"`
	Status            NodeStatus `json:"status,omitempty"`
}

// NodeSpec is what an operator sets on a node.
type NodeSpec struct {
	PodCIDR       string  `json:"podCIDR,omitempty"`
	ProviderID    string  `json:"providerID,omitempty"`
	Unschedulable bool    `json:"unschedulable,omitempty"`
	Taints        []Taint `json:"taints,omitempty"`
}

// TaintEffect says what a taint does to pods that do not tolerate it.
type TaintEffect string

// Taint effects.
const (
	TaintEffectNoSchedule       TaintEffect = "NoSchedule"
	TaintEffectPreferNoSchedule TaintEffect = "PreferNoSchedule"
	TaintEffectNoExecute        TaintEffect = "NoExecute"
)

// Taint repels pods that do not tolerate it.
type Taint struct {
	Key       string       `json:"key"`
	Value     string       `json:"value,omitempty"`
	Effect    TaintEffect  `json:"effect"`
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

// NodeConditionType names a node condition, such as Ready.
type NodeConditionType string

// NodeReady is True while the node agent heartbeats.
const NodeReady NodeConditionType = "Ready"

// NodeCondition is one observed fact about a node.
type NodeCondition struct {
	Type               NodeConditionType `json:"type"`
	Status             ConditionStatus   `json:"status"`
	LastHeartbeatTime  metav1.Time       `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime metav1.Time       `json:"lastTransitionTime,omitempty"`
	Reason             string            `json:"reason,omitempty"`
	Message            string            `json:"message,omitempty"`
}

// NodeAddressType is the kind of a node address.
type NodeAddressType string

// Node address types.
const (
	NodeHostName   NodeAddressType = "Hostname"
	NodeInternalIP NodeAddressType = "InternalIP"
	NodeExternalIP NodeAddressType = "ExternalIP"
)

// NodeAddress is one address of a node.
type NodeAddress struct {
	Type    NodeAddressType `json:"type"`
	Address string          `json:"address"`
}

// DaemonEndpoint is a port served by a node daemon.
type DaemonEndpoint struct {
	Port int32 `json:"Port"`
}

// NodeDaemonEndpoints lists the ports of the node agent.
type NodeDaemonEndpoints struct {
	KubeletEndpoint DaemonEndpoint `json:"kubeletEndpoint,omitempty"`
}

// NodeSystemInfo describes the node's software.
type NodeSystemInfo struct {
	MachineID               string `json:"machineID,omitempty"`
	SystemUUID              string `json:"systemUUID,omitempty"`
	BootID                  string `json:"bootID,omitempty"`
	KernelVersion           string `json:"kernelVersion,omitempty"`
	OSImage                 string `json:"osImage,omitempty"`
	ContainerRuntimeVersion string `json:"containerRuntimeVersion,omitempty"`
	KubeletVersion          string `json:"kubeletVersion,omitempty"`
	KubeProxyVersion        string `json:"kubeProxyVersion,omitempty"`
	OperatingSystem         string `json:"operatingSystem,omitempty"`
	Architecture            string `json:"architecture,omitempty"`
}

// NodeStatus is the node's observed state, written by its node agent.
type NodeStatus struct {
	Capacity        ResourceList        `json:"capacity,omitempty"`
	Allocatable     ResourceList        `json:"allocatable,omitempty"`
	Conditions      []NodeCondition     `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	Addresses       []NodeAddress       `json:"addresses,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	DaemonEndpoints NodeDaemonEndpoints `json:"daemonEndpoints,omitempty"`
	NodeInfo        NodeSystemInfo      `json:"nodeInfo,omitempty"`
	// PreparedResourceClaims are the resource claims the node's agent
	// may have prepared, each with the pods it is prepared for: written
	// before the agent asks a driver to prepare a claim for a pod and
	// removed only after the claim is unprepared (or the pod detached
	// from it). Only the node itself (or an admin) writes it; the API
	// server keeps it as stored in everyone else's writes. The claim controller drops a
	// reservation of a pod that is gone only while no node lists the
	// claim for that pod, unless the node is deleted, carries the
	// node.kubernetes.io/out-of-service taint, or is unreachable with the
	// pod evicted, and then for a claim on devices other nodes can reach
	// only once the node's recorded fence time has passed (the fencing
	// rule; allot's own field, Kubernetes has none, see docs/decisions.md).
	PreparedResourceClaims []PreparedResourceClaim `json:"preparedResourceClaims,omitempty"`
}

// Limits of NodeStatus.PreparedResourceClaims.
const (
	// MaxPreparedResourceClaims bounds the claims one node lists.
	MaxPreparedResourceClaims = 4096
	// MaxPreparedClaimPods bounds the pods of one claim's entry, as
	// Kubernetes bounds a claim's reservedFor.
	MaxPreparedClaimPods = 256
)

// AnnotationSelfFenceAfter is the Node annotation in which the node agent
// records its fence time at registration, as a Go duration ("20s"): when
// no heartbeat of the node has reached the API server for that long, its
// agent stops the pods holding devices other nodes can reach. Validation
// accepts only a positive duration. A Node without it records no fence
// time (docs/decisions.md, "Fencing").
const AnnotationSelfFenceAfter = "allot.dev/self-fence-after"

// AnnotationFence on a pod, "true", has the node agent's fence stop the
// pod whatever devices it holds (a boolean as strconv.ParseBool reads
// it).
const AnnotationFence = "allot.dev/fence"

// TaintNodeOutOfService is the taint an operator puts on a node to say it
// is down for good (Kubernetes' non-graceful node shutdown): the claims
// its agent listed as prepared are released without waiting for it.
const TaintNodeOutOfService = "node.kubernetes.io/out-of-service"

// Taints the node lifecycle controller puts on a node, with effect
// NoExecute, while its Ready condition is Unknown (no heartbeat) or False,
// as Kubernetes does. Pods that do not tolerate them are evicted once
// their toleration runs out (pods get 300 s by default).
const (
	TaintNodeUnreachable = "node.kubernetes.io/unreachable"
	TaintNodeNotReady    = "node.kubernetes.io/not-ready"
)

// PreparedResourceClaim is one claim a node's agent may have prepared.
type PreparedResourceClaim struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Pods are the UIDs of the node's pods the claim is prepared for.
	Pods []types.UID `json:"pods"`
}

// PreparedClaim returns the node's entry of the claim with uid, or nil.
func (s *NodeStatus) PreparedClaim(uid types.UID) *PreparedResourceClaim {
	for i := range s.PreparedResourceClaims {
		if s.PreparedResourceClaims[i].UID == uid {
			return &s.PreparedResourceClaims[i]
		}
	}
	return nil
}

// PreparedFor reports whether the node lists the claim with claimUID as
// prepared for the pod with podUID.
func (s *NodeStatus) PreparedFor(claimUID, podUID types.UID) bool {
	c := s.PreparedClaim(claimUID)
	return c != nil && slices.Contains(c.Pods, podUID)
}

// OutOfService reports whether the node carries the out-of-service taint
// (any effect).
func (n *Node) OutOfService() bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t Taint) bool { return t.Key == TaintNodeOutOfService })
}

// +kubebuilder:object:root=true

// NodeList is a list of nodes.
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Node `json:"items"`
}

// NodeNameFromHost is the node name a host takes by default (`allot
// node`, `allot up`, drivers that default NODE_NAME): the host name lower
// cased, without the characters a node name cannot hold and without
// leading or trailing dots and dashes; "node" when nothing is left.
func NodeNameFromHost(host string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			b.WriteRune(r)
		}
	}
	if s := strings.Trim(b.String(), "-."); s != "" {
		return s
	}
	return "node"
}
