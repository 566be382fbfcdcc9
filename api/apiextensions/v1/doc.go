// Package v1 holds the subset of apiextensions.k8s.io/v1
// CustomResourceDefinition that allot serves: group, names, scope and
// versions with an enforced openAPIV3Schema. Vendor parameter kinds (seed
// 002's CardParameters) are defined this way.
//
// +kubebuilder:object:generate=true
// +groupName=apiextensions.k8s.io
package v1
