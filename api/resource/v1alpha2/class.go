package v1alpha2

import (
	corev1 "allot.dev/allot/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true

// ResourceClass names a driver and the parameters that every claim of the
// class shares. Cluster-scoped, set up by an administrator.
type ResourceClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// DriverName is the driver that handles claims of this class.
	DriverName string `json:"driverName"`
	// ParametersRef points at class parameters: a ResourceClassParameters
	// object, or a vendor kind from which one is generated.
	ParametersRef *ResourceClassParametersReference `json:"parametersRef,omitempty"`
	// SuitableNodes narrows the nodes the scheduler considers for claims of
	// this class.
	SuitableNodes *corev1.NodeSelector `json:"suitableNodes,omitempty"`
	// ControllerName names the driver controller that allocates claims of
	// this class (seed 003). Empty: structured parameters; the scheduler
	// allocates.
	ControllerName string `json:"controllerName,omitempty"`
}

// ResourceClassParametersReference points at class parameters.
type ResourceClassParametersReference struct {
	APIGroup  string `json:"apiGroup,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// +kubebuilder:object:root=true

// ResourceClassList is a list of classes.
type ResourceClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceClass `json:"items"`
}
