// Package devicemanager runs unmodified Kubernetes device plugins
// (deviceplugin/v1beta1) on an allot node: it serves the Registration
// service on <dir>/kubelet.sock, watches each plugin's devices, advertises
// them as extended resources, and allocates them to pods at admission.
//
// The caller's duties, in order:
//
//  1. New(opts) reads the checkpoint (allocations and registered
//     resources survive a restart; a corrupt checkpoint is an error).
//  2. Start(ctx) removes stale sockets in the plugin directory and serves
//     kubelet.sock until ctx ends or Stop is called. A Manager is started
//     once; after Stop, make a new one (it reads the checkpoint).
//  3. The Manager is a pods.Admitter (and pods.Releaser), a
//     pods.ContainerConfigurer, a pods.HealthReporter and a pods.Monitor:
//     put it in pods.Hooks (as a Monitor only to fail pods whose devices
//     go unhealthy). Admit chooses and allocates devices; ContainerOptions
//     returns the plugin's Allocate response (and calls PreStartContainer
//     when the plugin asks for it); Release frees the pod's devices;
//     PodFailure fails a pod holding a device its plugin reports
//     Unhealthy. Options.Wake is called for the pods holding devices of a
//     resource whose devices changed.
//  4. The Manager is a node.NodeDecorator: DecorateNode sets capacity
//     (all devices) and allocatable (healthy devices) per resource.
//     Options.OnChange is called, outside any lock, whenever those
//     change; it must not block (the agent batches: UpdateNodeStatus).
//
// Guarantees: every RPC to a plugin carries a deadline; a device is never
// allocated to two pods; a pod whose devices are recorded but whose plugin
// is not (yet) registered is held, never started without its devices;
// running pods are never touched when a plugin goes away.
//
// Departures from KEP-3573 (seed 001), following the kubelet: a second
// registration of a resource replaces the first endpoint instead of being
// refused (a restarted plugin must be able to take its resource back);
// device IDs are opaque byte strings without the 63-character limit the
// proto comment mentions (the kubelet never enforced it and real plugins,
// e.g. for MIG or SR-IOV, send longer IDs).
package devicemanager
