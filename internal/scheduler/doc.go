// Package scheduler is allot's scheduler: it places pending pods on nodes
// by running the plugins of package framework over an immutable snapshot
// of the cluster, one pod at a time, and commits each decision with one
// POST of the pods/binding subresource. README.md draws the pipeline.
//
// A caller running the scheduler does, in order:
//
//  1. Fill a Config: a Client (required), optionally a shared
//     client.Factory (allot up), the SchedulerName whose pods it owns, the
//     score strategy and every timer (backoff, the unschedulable safety
//     net, bind, API and cycle deadlines), and a Metrics whose Registry it
//     serves. ExtraPlugins run after the default ones (which include
//     DynamicResources, fed from the scheduler's DRA informers by its
//     scheduler extension, package dra; the core reaches extensions only
//     through the framework's extension interfaces, from the registry,
//     package extensions).
//  2. Call Run(ctx, cfg), or New then (*Scheduler).Run. New registers the
//     informer handlers; Run starts the informers, waits for their caches,
//     and schedules until ctx ends. Run returns only after every binding
//     and status goroutine has finished.
//
// What the scheduler promises:
//
//   - Only pods with spec.schedulerName == Config.SchedulerName, no
//     spec.nodeName, no deletionTimestamp and not terminated are scheduled.
//   - A pod of this scheduler given a node by hand (spec.nodeName set, not
//     deleted or terminated) is never moved, but it is the only writer of
//     structured allocations: if some of the pod's claims are not
//     allocated and reserved for it, a claim cycle (NodeName and
//     DynamicResources only, on that node, without the pod's own
//     requests) allocates and reserves them with a binding of the pod to
//     the node it is on. While it cannot, the pod gets
//     ResourceClaimsAllocated=False with the reason (the FailedScheduling
//     wording, failing selector clause quoted) and a
//     FailedResourceClaimAllocation event per attempt, and waits in the
//     queue for the DRA events that may help; the condition turns True
//     once the claims are reserved. PodScheduled is not written and the
//     pod is never failed. Pods bound by a normal cycle already have their
//     claims reserved by that binding and never enter a claim cycle.
//   - One scheduling loop; binding is asynchronous (a goroutine per pod,
//     bounded by BindTimeout), so a slow write never stalls the loop. The
//     pod is assumed on its node in the cache before binding, so the next
//     cycle sees the resources taken; a failed binding undoes the
//     reservation and the assumption and retries the pod with backoff.
//   - A pod whose new allocations hold devices with binding conditions
//     (an extension's PreBindExtension.TwoStep says so) is bound in two
//     steps on its binding goroutine: its claims are committed first
//     (Binding.ClaimsOnly, same fences) with a WaitingForBindingConditions
//     event, the extension waits up to BindingConditionsTimeout for the
//     conditions, and then the pod is bound; a failure releases the
//     claims (PreBindExtension.Release) and retries the pod.
//   - A pod that fits no node gets PodScheduled=False with reason
//     Unschedulable and kube-scheduler's summary message, written (with the
//     pod's resourceVersion as a precondition) only when it changes, and a
//     FailedScheduling event every attempt. It is parked until a cluster
//     event that a rejecting plugin registered may help it, or until
//     UnschedulableTimeout passes.
//   - Every API call carries a deadline.
//
// The pure parts are usable alone: framework (the pipeline, no I/O),
// plugins (the default plugins and NewDefaultFramework), queue and cache.
// `allot explain` uses ListSnapshot, Explain and WriteExplanation to run
// the same framework over one List of the cluster (DRA kinds included);
// `allot simulate` runs Schedule and Reserve over an in-memory snapshot.
package scheduler
