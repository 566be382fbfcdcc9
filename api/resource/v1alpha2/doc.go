// Package v1alpha2 holds the resource.k8s.io/v1alpha2 kinds of dynamic
// resource allocation: ResourceClass, ResourceClaim, ResourceClaimTemplate
// and PodSchedulingContext in the shape of Kubernetes 1.29 (with seed 003's
// controllerName), and NodeResourceSlice, ResourceClaimParameters and
// ResourceClassParameters with the partitionable model of seed 002.
//
// A class whose ControllerName is empty uses structured parameters: the
// scheduler allocates its claims from NodeResourceSlices. A class with a
// ControllerName is allocated by that driver's controller.
//
// +kubebuilder:object:generate=true
// +groupName=resource.k8s.io
package v1alpha2
