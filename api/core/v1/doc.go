// Package v1 holds the core ("v1") kinds that allot serves: Namespace, Node,
// Pod, Event, ResourceQuota and Binding. They are the subset of Kubernetes'
// core/v1 that allot runs, with the same JSON field names, so manifests
// written for Kubernetes decode here unchanged as long as they use only the
// fields listed. Decoding is strict: a field allot does not support is an
// error naming that field, never silently dropped.
//
// +kubebuilder:object:generate=true
// +groupName=
package v1
