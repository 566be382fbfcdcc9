// Package client is the public Go client of allot's API server: the one
// every component (scheduler, controllers, node agent, drivers) and the CLI
// use to read and write objects.
//
// The contract:
//
//   - A Client is built from a kubeconfig (NewForKubeconfig, with
//     DefaultKubeconfigPath when the path is empty) or a *rest.Config
//     (NewForConfig). It is safe for concurrent use and shares one HTTP
//     connection pool across all its typed clients.
//   - Typed access goes through Resource[T, L], one value per kind and
//     namespace (c.Pods(ns), c.ResourceClaims(ns), ...). An empty namespace
//     on a namespaced kind means all namespaces: List and Watch see every
//     namespace, Create and Update use the object's own namespace, and Get,
//     Patch and Delete fail because they need one.
//   - Objects returned by typed calls have an empty TypeMeta, as with
//     client-go's typed clients; use scheme.Scheme.ObjectKinds to find the
//     kind of a typed object.
//   - Every error from the server is an apimachinery *StatusError, so
//     apierrors.IsNotFound, IsConflict, IsAlreadyExists and friends work.
//   - Every call takes a context; cancelling it aborts the request, and for
//     Watch and Logs it closes the stream.
//   - Custom resources and kinds unknown at compile time go through
//     c.Dynamic() and c.Discovery().
//
// Informers (NewInformer, Factory) are client-go SharedIndexInformers, so
// client-go's cache, workqueue and event handler helpers apply unchanged;
// Lister[T] is a typed read view over an informer's indexer. Informers keep
// metadata.managedFields unless built WithoutManagedFields (a Factory
// option, or Resource.WithoutManagedFields), which leaves them nil (and
// asks allot's API server not to send them); such an object sent back in
// an Update keeps the stored managedFields. The factory's ResourceSlice
// informer shares equal device attribute and capacity maps across devices
// and informers (InternDeviceMaps). EventRecorder
// writes core/v1 Events without ever blocking its caller.
package client
