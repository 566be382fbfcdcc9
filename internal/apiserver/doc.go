// Package apiserver serves allot's objects over Kubernetes REST conventions,
// close enough that kubectl and client-go work against it.
//
// A request flows: authenticate (bearer token) -> parse the path into a
// requestInfo (group, version, resource, namespace, name, subresource) ->
// look the resource up in the kind registry -> decode the body strictly ->
// default, prepare, validate -> admission (namespace lifecycle, quota,
// selectors, CRD schemas) -> authorize with the object -> write to etcd
// through internal/storage -> encode the answer. Reads of collections and
// watches are served from one in-memory watch cache per resource, so many
// watchers cost etcd one watch.
//
// Every create, update and patch records its writer's fields in
// metadata.managedFields, and server-side apply (PATCH with
// application/apply-patch+yaml) merges by that ownership, both through
// Kubernetes' own field manager (fieldmanager.go, apply.go); an apply is
// authorized as the create or update it turns into.
//
// resourceVersion is the etcd revision. Objects are stored without it and
// it is spliced into "metadata" when they are served.
package apiserver
