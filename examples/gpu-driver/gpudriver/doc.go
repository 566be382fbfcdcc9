// Package gpudriver is the node side of the example structured DRA driver
// gpu.example.com, built on pkg/driver/kubeletplugin: simulated GPUs, a
// whole one and a partitionable one by default (seed 002's example), whose
// claims become CDI devices.
//
// The flow of one claim through Prepare:
//
//	--prepare-delay sleep, --fail-prepares injected failures
//	already prepared (its CDI spec file exists)? -> return its CDI name
//	every allocated instance ID in the current model? else ErrNotFound
//	any of them (or an ancestor) Unhealthy?          -> error, retried
//	decode GpuClaimParameters (sharing strategy) and GpuClassParameters
//	run the class's initCommand (--init-timeout)     -> error with output
//	write CDI_DIR/gpu.example.com-gpu_UID.json       -> gpu.example.com/gpu=UID
//	append "prepare UID NS/NAME" to --state-file
//
// Unprepare appends "unprepare UID NS/NAME" when the spec file exists,
// then removes it (absent: success); in that order, so that a driver
// killed in between never leaves a claim counted as prepared whose spec
// is gone. Because "prepared" is "the spec file exists", the state
// survives a driver restart.
//
// The model comes from --config (or the embedded default-model.yaml), is
// validated as a NodeResourceSlice's partitionable model, and is reloaded
// and republished when the file changes.
//
// --publish picks the API: seed (allot's node API; the node agent
// publishes the NodeResourceSlice and sends each claim's allocation) or
// v1 (the kubelet's DRA API through the SDK's kubelet mode: the driver
// publishes resource.k8s.io/v1 ResourceSlices and reads each claim itself
// with a node-driver token; models without partitions only, by default
// the embedded default-model-v1.yaml). Prepare is the same either way.
package gpudriver
