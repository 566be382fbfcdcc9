// Package controller is the SDK for the control-plane side of a DRA driver
// (seed 003, "DRA with a control-plane controller"): it watches claims,
// classes, pods and PodSchedulingContexts, and drives a vendor's Driver
// through allocation, the negotiation with the scheduler, and
// deallocation, so that a driver author writes only resource logic.
//
// Which claims are the controller's: those whose ResourceClass has
// driverName Config.DriverName and controllerName Config.ControllerName
// (by default the same name). The allocation records both in the claim's
// status (status.driverName, status.controllerName) and a resource handle
// for the kubelet plugin named DriverName. A claim the controller
// allocated, or holds its finalizer on, stays its own for deallocation
// even when its class is deleted or changed.
//
// The driver author's duties, in order:
//
//  1. Implement Driver. Allocate must be idempotent per claim UID (see its
//     documentation): the controller may call it again after it could not
//     record a result, also after a restart. Deallocate must accept claims
//     whose allocation never reached the API.
//  2. Run the controller with a token of role `driver DRIVERNAME`
//     (Config.Client), at most one instance per controller name.
//  3. To derive vendor-side state from the API, give the controller a
//     client.Factory (Config.Factory) and take listers from it before Run:
//     Run waits for every informer of the factory before it starts work.
//
// What the controller does:
//
//   - Immediate claims of its classes: add the finalizer
//     CONTROLLER/deletion-protection (Finalizer), resolve the class's and
//     the claim's parameters (GetClassParameters, GetClaimParameters),
//     call Allocate with no node, write status.allocation, driverName and
//     controllerName through the status subresource.
//   - PodSchedulingContexts (named after their pod; ignored when the pod
//     is gone, being deleted, or not the owner): for the pod's pending
//     WaitForFirstConsumer claims of its classes, when spec.selectedNode is
//     set, add the finalizer, Allocate for that node, and write the
//     allocation together with the pod in status.reservedFor in one status
//     update. Then, for the claims still pending, call UnsuitableNodes with
//     the potential nodes, the nodes found unsuitable before (re-checked),
//     and the selected node when allocating for it failed (which is always
//     reported unsuitable), and write the pod's entries of its claims in
//     status.resourceClaims (at most 128 nodes each; other drivers'
//     entries are left alone; entries of claims allocated since are
//     dropped). Contexts are checked again when a claim of the driver
//     changes and every Config.Resync.
//   - Claims being deleted, or with status.deallocationRequested, that
//     nobody reserves and that the controller may hold resources for
//     (its finalizer, or its allocation): call Deallocate, remove the
//     finalizer, clear status.allocation, deallocationRequested,
//     driverName and controllerName. Nothing is deallocated while
//     status.reservedFor is not empty. The finalizer goes before the
//     status is cleared because status.driverName is what lets the driver
//     write a claim whose class was deleted.
//
// Every allocation and deallocation of a claim happens under a per-claim
// lock, on a fresh read of the claim from the API server, so that the
// claim's own handling and that of its pods' contexts never race. Failed
// work is retried with exponential backoff (Config.MinRetryDelay to
// MaxRetryDelay); failures of the driver are recorded as Warning events on
// the claim (ReasonAllocationFailed, ReasonDeallocationFailed,
// ReasonParametersUnavailable). Every API call has Config.APITimeout and
// every driver call Config.DriverTimeout as deadline.
package controller
