// Package dra is the node side of dynamic resource allocation: it
// registers the DRA drivers' kubelet plugins of this node, publishes their
// resources as NodeResourceSlices, and prepares the ResourceClaims of the
// node's pods before their containers start. Drivers speak allot's DRA
// node API (api/dra/v1alpha1) or the kubelet's (k8s.io/kubelet dra/v1 and
// v1beta1, "kubelet drivers", below).
//
// The caller's duties, in order:
//
//  1. New(opts) reads the checkpoint of prepared claims (a corrupt
//     checkpoint is an error: starting without it could leave claims
//     prepared forever).
//  2. Start(ctx) starts the informers of claims and of this node's slices
//     and waits for their caches, then watches Options.RegistryDir for
//     plugin registration sockets, publishes slices, and unprepares the
//     checkpointed claims of pods that are gone or finished. A Manager is
//     started once; Stop ends it (slices and the checkpoint stay for the
//     next Manager).
//  3. The Manager is a pods.Admitter, pods.Releaser and
//     pods.ContainerConfigurer: put it in pods.Hooks (Admit holds pods
//     with claims until Start has returned). Admit holds a pod
//     (never rejects it) until every claim is allocated, reserved for it
//     and usable on this node, and its drivers are registered; then it
//     prepares the claims, with back-off on failure. ContainerOptions
//     gives each container the CDI devices of the claims it names in
//     resources.claims. Release unprepares and then records the pod
//     condition ResourceClaimsUnprepared=True. The Manager is also a
//     pods.HealthReporter (the health of the instances of each container's
//     claims, from the driver's last streamed model) and a pods.Monitor
//     (PodFailure fails a pod holding an instance its driver reports
//     Unhealthy; the agent adds it under the FailPod policy).
//  4. Options.Wake is called with a pod's UID when something it waits for
//     changed (one of its claims, a driver registration, the end of a
//     back-off) or the health of its claims' instances may have changed
//     (a driver's model changed, or the driver went away): the agent
//     pokes the pod's worker.
//
// Claims of both resource.k8s.io versions: a pod's claims are looked up
// in the informers of v1alpha2 and of v1 claims (a claim is stored in one
// version and is in that informer only; views never count). A v1 claim
// is checked, prepared and recorded in its v1alpha2 form (v1Form, from
// resourceconv.ClaimToV1alpha2): it must be allocated, reserved for the
// pod and its allocation's nodeSelector must select this node, and each
// driver with results gets one handle, what it would get for an
// equivalent v1alpha2 claim allocated by allot's scheduler: the claim's
// UID, namespace and name and a structured resource handle whose
// instances are the driver's devices in the pool named like this node
// (seed instances projected as v1 devices), mapped back to instance IDs by
// resourceconv.SeedInstanceID, with nodeName this node. The allocation's
// opaque configuration for the driver (status.allocation.devices.config,
// opaque.driver == the driver) fills the handle's vendor parameters, which
// drivers such as the example gpu driver read: source FromClaim becomes
// vendorClaimParameters, FromClass vendorClassParameters, each passed as it
// is; for each request the last entry that applies wins, and the driver's
// requests must agree (one handle carries one configuration), otherwise the
// pod waits with the claim's problem named. Devices of the driver in other
// pools (network-attached) go to it in the same handle, as its opaque data
// (resource_handle): {"devices": [the v1 results, in their JSON form]};
// the driver decides what to do with them. A driver without a plugin here
// holds the pod as for v1alpha2 claims, and the checkpoint records each
// claim's version; unprepare sends the recorded handles again.
//
// Registration follows the kubelet's plugin watcher: a plugin creates a
// socket in RegistryDir serving pluginregistration/v1 Registration; the
// Manager calls GetInfo, accepts Type "DRAPlugin" with a DNS-subdomain name,
// "v1alpha1" (or a kubelet DRA service) among the supported versions and an absolute DRA socket path
// as endpoint, and answers NotifyRegistrationStatus. A new registration of
// an allot driver replaces the old one. A driver is unregistered when its
// registration socket disappears, or its resource stream breaks and cannot
// be re-opened.
//
// Slices: one NodeResourceSlice per (node, driver), owned by the Node,
// updated in place when the driver's model changes and not written when it
// does not; a slice someone else changed or deleted is written again. The
// slice of a driver that went away is deleted after
// Options.SliceGracePeriod unless the driver comes back; at start, slices
// of this node whose driver does not register within the grace period,
// and duplicates, are deleted. An invalid model is logged, recorded as a
// Warning event on the Node, and the previous slice is kept.
//
// Kubelet drivers (built for Kubernetes, on the upstream kubeletplugin
// library) register offering v1.DRAPlugin or v1beta1.DRAPlugin and no
// v1alpha1 (a plugin offering v1alpha1 is an allot driver whatever else it
// offers; v1 is preferred to v1beta1 whatever the order), and optionally
// v1.DRAResourceHealth or v1alpha1.DRAResourceHealth. They differ from
// allot drivers in:
//
//   - instances: a name may have several (a rolling update registers the
//     new one beside the old, through another socket); calls go to the
//     newest whose connection is not broken, and the driver is gone when
//     its last registration socket is (driverSet);
//   - slices: they publish their own resource.k8s.io/v1 ResourceSlices,
//     owned by the Node; the Manager deletes those of a driver with no
//     instance for the grace period, and at start gives the drivers of
//     the slices it finds that period to register (kubeletslices.go);
//   - prepare: by reference ({namespace, uid, name}; v1-stored claims
//     only: a v1alpha2 claim holds the pod), the answer being devices with
//     request names, pool, device and CDI IDs, checkpointed in the claim's
//     handle record (Kubelet, Devices); a whole-call failure of several
//     claims is retried claim by claim, as the library fails a call for
//     one unreadable claim (kubeletcalls.go);
//   - containers get the CDI devices of the request they name (both kinds:
//     an allot driver's devices serve every request);
//   - health: one stream per instance that offers it, reports kept per
//     (driver, pool, device) until their timeout (kubelethealth.go);
//     AllocatedResourcesStatus names them DRIVER/POOL/DEVICE, PodFailure
//     fails on Unhealthy.
//
// A driver publishes a node's devices through one API; when it registers
// through the other API than its slices of the node, the slices the
// Manager owns are removed (switchPublishing).
//
// Guarantees (seed 000): prepare and unprepare are idempotent on the
// driver's side and batched per driver; every claim the Manager asked a
// driver to prepare is unprepared at least once, also after a restart and
// for pods deleted while the agent was down; a claim shared by several pods
// of this node is prepared once and unprepared after the last of them; a
// prepare that answers NOT_FOUND makes the Manager read the claim from the
// API server again before it retries. Every call to a driver carries a
// deadline.
package dra
