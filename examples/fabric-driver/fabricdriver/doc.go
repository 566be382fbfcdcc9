// Package fabricdriver is the example control-plane DRA driver
// fabric.example.com (seed 003): pools of network-attached accelerators,
// each reachable from the nodes that carry its labels (a rack, a zone),
// allocated by a driver controller built on pkg/driver/controller and
// "attached" on the node by a kubelet plugin built on
// pkg/driver/kubeletplugin.
//
// Claims ask through FabricClaimParameters (fabric.example.com/v1alpha1,
// spec.count, spec.model, spec.optional); a claim without parameters asks
// for one unit of any model. The class names the driver as both
// driverName and controllerName.
//
// The controller (RunController), per claim:
//
//	Immediate:            the pool of the claim's model with the most free units
//	WaitForFirstConsumer: the same among the pools the selected node reaches
//	units:                the pool's lowest free unit IDs (POOL-0, POOL-1, ...)
//	allocation:           resourceHandles[0].data = {"pool","model","units"}
//	                      availableOnNodes = the pool's labels
//	nothing fits:         optional -> {"fallback":true}, availableOnNodes unset
//	                      otherwise an error (event AllocationFailed, retried)
//
// Taken units are derived from the handles of the claims allocated in the
// API plus those handed out but not yet recorded (kept in memory by claim
// UID, under one lock, so two claims racing for the last unit cannot both
// get it); nothing else is stored, so nothing leaks when the controller
// dies between allocating and recording. UnsuitableNodes places all of a
// pod's pending claims together on each potential node; optional claims
// avoid nodes where they would get nothing, unless they would get nothing
// anywhere.
//
// The kubelet plugin (RunPlugin) publishes an empty model (the node agent
// then publishes an empty NodeResourceSlice for the driver). Prepare
// checks the handle against the pools (an unknown pool or unit is
// NOT_FOUND), "attaches" each unit as the file ATTACH_DIR/CLAIM_UID/UNIT,
// and writes the claim's CDI spec with FABRIC_UNITS, FABRIC_POOL and
// FABRIC_MODEL (empty for a fallback). Unprepare removes the spec and the
// claim's attach directory. Both are idempotent; absent is done.
//
// The package uses only public packages.
package fabricdriver
