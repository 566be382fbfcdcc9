// Package resourceclaim is the ResourceClaim controller. It keeps five
// promises:
//
//  1. Claims from templates. For every pod that is neither terminal nor
//     being deleted, each spec.resourceClaims entry naming a
//     resourceClaimTemplateName without an entry in
//     status.resourceClaimStatuses gets one ResourceClaim, generated from
//     the template (named POD-CLAIM-XXXXX by GeneratedClaimName, the
//     suffix derived from the pod's UID and the entry; labels, annotations
//     and spec from the template, the pod as controlling owner, and the
//     annotation PodClaimNameAnnotation naming the pod's entry). The
//     claim's name is then recorded in the pod's status. A claim this
//     controller created for the pod but did not record (the status write
//     was lost), or whose create answer was lost (the retry's create finds
//     it by name), is recorded instead of creating a second one; claims it
//     did not create are never adopted. A create refused by quota becomes a Warning event
//     on the pod (FailedResourceClaimCreation) and a retry with backoff.
//  2. Reservation clean-up. A status.reservedFor entry of a pod is removed
//     once the pod is terminal with condition ResourceClaimsUnprepared=True,
//     or once it is gone (its absence from the cache confirmed by a live
//     read) and no node lists the claim as prepared for it in
//     status.preparedResourceClaims (the pod's node read from the API
//     server, or every node when the controller never saw the pod); never
//     while a node may still have the claim prepared, except by the
//     fencing rule (fence.go): a claim of a pod gone, or being deleted with
//     its toleration of the node's unreachable taint run out, on a node
//     tainted node.kubernetes.io/unreachable, or of a pod on a node deleted
//     or tainted node.kubernetes.io/out-of-service, is released at once
//     when it holds only node-local devices, and when it holds devices
//     other nodes can reach (fence.AllocationReachesOtherNodes) only once
//     the node's last heartbeat is older than the fence time it records
//     (annotation allot.dev/self-fence-after) plus Options.FenceMargin; a
//     node that records none never has such a claim released this way.
//     A deleted node's fence time and heartbeat are remembered; a pod's
//     node the controller never knew is judged as deleted when the
//     controller started, with the largest fence time known. A force
//     deletion therefore waits for the node to stop the containers and
//     unprepare, or for the fence; the claim gets a ReleaseWaitsForNode
//     event saying so (release.go has the argument why no agent prepares
//     after the controller looked).
//  3. Deallocation. A structured claim (delete-protection finalizer, no
//     control-plane controller) that nobody reserves is deallocated when its
//     allocation mode is WaitForFirstConsumer or it is being deleted: the
//     allocation is cleared through the status subresource, then the
//     finalizer is removed, after which the server deletes a claim whose
//     deletion was requested. Immediate claims stay allocated.
//  4. Deallocation requests (seed 003). When dropping obsolete
//     reservations leaves a WaitForFirstConsumer claim of a driver's
//     controller (class or status controllerName) unused, the same status
//     write sets deallocationRequested; the driver deallocates and clears
//     it. The controller never clears such an allocation nor removes the
//     driver's finalizer, so deleting the claim waits for the driver.
//  5. Scheduling contexts for pods given a node by hand. A bound pod (not
//     terminal or being deleted) with a pending control-plane claim
//     (WaitForFirstConsumer, not allocated) gets a PodSchedulingContext
//     named after it, owned by it, whose spec is only selectedNode = the
//     pod's node; a different spec is put back, and a context of an earlier
//     pod with the same name is deleted. The drivers allocate for that
//     node; the scheduler's claim cycle then reserves the claims.
//
// Versions: claims and claim templates of resource.k8s.io/v1alpha2 and v1
// are one set, each object stored in the version it was written in and
// read through the other as a view (resourcev1alpha2.IsView). The
// controller handles each object through its stored version and never
// acts on a view: a claim generated from a template is created in the
// template's version (the same name, metadata and owner either way,
// allocator.NewClaimFromTemplateV1), and reservations, deallocation and
// the finalizer of a v1 claim are written through the v1 client. Every
// allocated v1 claim is structured and waits for its first consumer, so
// promises 1 to 3 hold for v1 as for structured WaitForFirstConsumer
// v1alpha2 claims (deallocation also clears the drivers' status.devices);
// 4 and 5 concern control-plane claims, which only v1alpha2 has.
//
// Shape: informer event handlers only decide whether an object needs work
// and enqueue its key; workers pop keys and sync one pod or claim, re-queued
// with rate limiting on error; a periodic resync enqueues everything that
// still needs work. Reads come from the informers' caches (claims by an
// index on their owner pod, templates with the API server as fallback);
// all writes go through the API server with a deadline and retry on
// conflicts with fresh reads. The controller manager runs DefaultWorkers
// workers (--concurrent-resource-claim-syncs).
package resourceclaim
