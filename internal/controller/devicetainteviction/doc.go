// Package devicetainteviction evicts pods whose claims hold a device
// tainted NoExecute, as Kubernetes' DeviceTaintEviction controller does,
// through the eviction path of the node taint controller
// (internal/controller/taineviction: its rate limiter and EvictPod).
//
// Its promises:
//
//   - A pod is evicted once a NoExecute taint on a device allocated to a
//     claim reserved for it comes due: at the taint's timeAdded plus the
//     shortest tolerationSeconds of the matching tolerations recorded in
//     the device's allocation result; at timeAdded with no matching
//     toleration; never when every matching toleration has no seconds.
//     The taint may be the device's own (its ResourceSlice, the pool's
//     newest generation) or a DeviceTaintRule's.
//   - Claims are found from the pod's UID in their status.reservedFor, so
//     every claim a pod uses counts whoever made it: named in
//     spec.resourceClaims, made from a template, or made by the scheduler
//     for an extended resource. Claims of both resource.k8s.io/v1 and the
//     seed's v1alpha2 count; a seed allocation has no tolerations, and its
//     devices are the instances' projections (driver, the node as pool,
//     allocator.SeedDeviceName), each with the leaves below it (a rule on
//     a partition reaches the pod holding the whole GPU).
//   - An eviction is the DisruptionTarget condition (reason
//     DeletionByDeviceTaintManager), a graceful delete with a UID
//     precondition, a DeviceTaintManagerEviction event ("Marking for
//     deletion"), and device_taint_eviction_controller_pod_deletions_total
//     and _pod_deletion_duration_seconds. Evictions are paced by the
//     limiter shared with node taint eviction.
//   - Removing the taint (the rule deleted or changed, the slice
//     republished) or tolerating it before it comes due cancels a pending
//     eviction, with a DeviceTaintManagerEviction event "Cancelling
//     deletion".
//   - Each DeviceTaintRule's status has the EvictionInProgress condition
//     as Kubernetes sets it: True with the number of pods pending while
//     any are, then Completed or NotStarted; NoEffect with what the rule
//     would do, for effect None; OtherEffect otherwise. Updated at most
//     every StatusPeriod while it changes.
//
// It does not release claims: the evicted pod terminates, its node
// unprepares the claims, and the ResourceClaim controller's release rule
// (internal/controller/resourceclaim) frees them.
package devicetainteviction
