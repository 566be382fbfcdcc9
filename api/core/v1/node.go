package v1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
