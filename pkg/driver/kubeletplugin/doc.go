// Package kubeletplugin is the SDK for the node side of a structured DRA
// driver: it serves allot's DRA node API (api/dra/v1alpha1) and announces
// it through the kubelet plugin registration API, so that a driver author
// writes only device logic, the three methods of Driver.
//
// The driver's duties, in order:
//
//  1. Implement Driver. Enumerate describes the node's devices; Prepare
//     makes one claim's allocated instances usable and returns their CDI
//     device names (write the CDI spec with package cdi); Unprepare undoes
//     Prepare. Prepare and Unprepare must be idempotent, because the node
//     agent retries and repeats them, also across driver restarts: derive
//     "is this claim prepared" from state on disk, not from memory.
//  2. In Prepare, check that every allocated instance still exists and
//     wrap ErrNotFound when one does not: the node agent then re-reads the
//     claim before it retries. Any other error is retried as it is.
//  3. Call Start once. It enumerates, removes stale sockets, serves the
//     DRA socket (Options.PluginDir/dra.sock) and the registration socket
//     (Options.PluginsRegistryDir/DRIVER-reg.sock), and returns.
//  4. Call Plugin.PublishResources whenever the devices change (health,
//     hot-plug, configuration): the node agent receives the new model when
//     it differs from the last one.
//  5. Call Plugin.Stop (or cancel Start's context) on shutdown; it removes
//     both sockets, so the node agent sees the driver go.
//
// What the SDK guarantees: every claim of a batched request is answered on
// its own, keyed by its UID, and claims run concurrently up to
// Options.MaxConcurrentClaims; a panic in driver code fails only its
// claim; a claim whose structured_resource_handle is not valid JSON fails
// with INVALID_ARGUMENT and an error naming that field, and never reaches
// the driver; the first NodeListAndWatchResources message is sent at once
// and the stream ends cleanly (io.EOF at the client) on Stop.
//
// Driver methods are called concurrently for different claims, never
// concurrently for the same claim UID; the context carries the node
// agent's deadline.
//
// # Kubelet mode
//
// With Options.API = APIKubelet the plugin speaks the kubelet's DRA API
// (k8s.io/kubelet/pkg/apis/dra v1 and v1beta1) instead, which allot's node
// agent and Kubernetes' kubelet both call; the Driver does not change.
// The SDK then needs Options.NodeName and Options.KubeClient (on allot, a
// node-driver token DRIVER@NODE) and does what the node agent does for
// allot's API:
//
//   - it publishes the model as resource.k8s.io/v1 ResourceSlices of the
//     node, owned by the Node, projected as allot projects a
//     NodeResourceSlice (device = instance name, attributes under the
//     driver's domain, quantities as capacities, unhealthy instances left
//     out), and keeps them so; a model with partition groups, which v1
//     devices cannot express, is refused;
//   - for each claim to prepare it reads the v1 ResourceClaim, checks its
//     UID and allocation, and hands Prepare the Claim the node agent would
//     send (resourceconv.DriverHandle: this node's instances, the opaque
//     configuration for the driver as vendor parameters); it answers each
//     allocated device of the driver with the CDI names Prepare returned.
//     A claim that cannot be read fails on its own;
//   - Unprepare gets the claim's namespace, name and UID only.
package kubeletplugin
