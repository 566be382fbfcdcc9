package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true

// Namespace groups namespaced objects. Deleting it deletes everything in it.
type Namespace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NamespaceSpec   `json:"spec,omitempty"`
	Status            NamespaceStatus `json:"status,omitempty"`
}

// FinalizerName names a namespace finalizer.
type FinalizerName string

// FinalizerKubernetes is the finalizer that the namespace controller removes
// once every object in the namespace is gone.
const FinalizerKubernetes FinalizerName = "kubernetes"

// NamespaceSpec holds the namespace's finalizers.
type NamespaceSpec struct {
	Finalizers []FinalizerName `json:"finalizers,omitempty"`
}

// NamespacePhase is Active or Terminating.
type NamespacePhase string

// Namespace phases.
const (
	NamespaceActive      NamespacePhase = "Active"
	NamespaceTerminating NamespacePhase = "Terminating"
)

// NamespaceNodeLease holds each node's heartbeat Lease, named like the
// node, as in Kubernetes.
const NamespaceNodeLease = "kube-node-lease"

// NamespaceStatus is the observed state of a namespace.
type NamespaceStatus struct {
	Phase NamespacePhase `json:"phase,omitempty"`
}

// +kubebuilder:object:root=true

// NamespaceList is a list of namespaces.
type NamespaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Namespace `json:"items"`
}
