// Package dradiff is a differential test of allot's resource.k8s.io/v1
// allocator (pkg/allocator: NewInventory, NewState, PrepareV1,
// AllocateV1) against Kubernetes' own structured allocator
// (k8s.io/dynamic-resource-allocation/structured v0.37.2) with the features
// on by default in Kubernetes 1.37 that the cases use: AdminAccess,
// PrioritizedList, PartitionableDevices and DeviceTaints, which select
// upstream's "stable" variant; cases with distinctAttribute constraints,
// shareable devices or capacity requests add ConsumableCapacity and
// FractionalCapacityRange, which select "incubating".
//
// From a fixed seed it generates small random clusters (1-3 labelled
// nodes; ResourceSlices with node-local pools, network-attached pools by
// allNodes, node selector or per-device node selection, pools split over
// two slices, incomplete pools, older generations, pools made invalid by a
// repeated device name, shared counters in a slice of their own consumed
// by partitions, taints; NICs that allow multiple allocations, with a
// consumable capacity and no request policy, validValues, a validRange
// with a step (and a max) or a fractional range; device classes with CEL
// selectors; devices already allocated to other claims, and shares of
// shareable devices held by them) and one pod's 1-3 claims (exact
// counts, allocation mode All, firstAvailable with 2-3 alternatives,
// selectors on attributes and capacity, matchAttribute and
// distinctAttribute constraints, tolerations, admin access, capacity
// requests on NICs and GPUs, sometimes of a capacity no device has). Every
// generated object passes allot's API validation (TestGeneratorValid).
//
// For every node of a case both allocators run, each with a deadline, and:
//
//   - every allocation either side makes must be valid by the API's
//     documented rules, as judged by a checker written for this test
//     (check_test.go; it borrows only upstream's CEL evaluation and calls
//     nothing of allot), including the firstAvailable order: no earlier
//     alternative of a request could have been allocated with the rest of
//     the allocation unchanged, which is asked of upstream
//     (priority_test.go). Upstream's allocations pass through the same
//     checks, so a checker bug shows there too; TestCheckerCatches proves
//     that broken allocations fail it. allot's firstAvailable combination
//     must also be the lexicographically first one that fits, as
//     AllocateV1 promises;
//   - whether the pod's claims fit must agree. A timeout on either side is
//     counted, not compared. Upstream's search is exhaustive within one
//     order of claims and requests but stops at the first fit, so when it
//     finds nothing and allot has a valid allocation, upstream is asked
//     again in other orders (All requests first: a constraint broken by an
//     All device ends its search; firstAvailable pinned to allot's
//     alternatives: it fails a request when any alternative asks for all
//     devices while a pool is incomplete). If one fits, the case is a
//     "packing case" and is logged. Cases that rest on allot's documented
//     treatment of admin access (it takes nothing from other claims or
//     shared counters; upstream blocks the device for later claims of the
//     pod and counts its counters) are shown by asking upstream with the
//     admin-access claims last or without the admin-access requests, and
//     logged as differences. Where upstream's variants disagree with each
//     other and allot agrees with one, the case is logged too.
//
// Any other disagreement fails the test, with the case shrunk to a small
// reproduction printed as YAML.
//
// Flags: -dradiff.seed, -dradiff.cases, -dradiff.long (40 times the
// cases), -dradiff.case (one case by index, to reproduce it),
// -dradiff.limit (deadline of one allocation attempt per side),
// -dradiff.show (log every comparison). A long run:
//
//	go test ./test/dradiff/ -run TestDifferential -dradiff.long -timeout 2h -v
//
// The package has only test files and this one, and nothing imports it.
// Its upstream dependencies (k8s.io/dynamic-resource-allocation and
// k8s.io/apiserver, which it pulls in) are test-only: the rule
// upstream-dra-test-only of test/layering forbids them in non-test
// packages.
package dradiff
