// Package translator is the controller of the example DRA driver
// gpu.example.com that turns each GpuClaimParameters (the driver's own
// claim parameters kind, a custom resource) into the ResourceClaimParameters
// the scheduler's allocator understands, as seed 002 describes for vendor
// parameters.
//
// For a GpuClaimParameters NAMESPACE/NAME it maintains the
// ResourceClaimParameters NAMESPACE/NAME:
//
//   - generatedFrom {apiGroup: gpu.example.com, kind: GpuClaimParameters,
//     name: NAME}, by which the scheduler finds it from a claim's
//     parametersRef;
//   - a controller ownerReference to the GpuClaimParameters, so the garbage
//     collector deletes it with its source;
//   - vendorParameters: the source's apiVersion, kind and spec, passed to
//     the kubelet plugin in the allocation;
//   - shareable when spec.sharing.strategy is TimeSlicing or
//     SpacePartitioning;
//   - one request for driver gpu.example.com with spec.count required
//     instances gpu-0, gpu-1, ..., each with the selector
//     `versions["runtimeVersion"] >= "V" && quantities["memory"] >= "Q"`
//     built from spec.minimumRuntimeVersion and spec.minimumMemory (only
//     the clauses that are set; `true` when neither is).
//
// A ResourceClaimParameters of that name that was not generated from the
// source is never overwritten: the translator records a Warning event
// (TranslationConflict) on the GpuClaimParameters instead. An invalid spec
// gets a Warning event (InvalidParameters) naming the field, and no
// translation: one generated earlier is deleted, so claims wait rather
// than allocate with outdated parameters.
//
// Run needs read access to GpuClaimParameters and ResourceClaimParameters
// and write access to ResourceClaimParameters generated from
// gpu.example.com and to events: the API server's driver role for driver
// gpu.example.com grants exactly that. The package uses only public
// packages.
package translator
