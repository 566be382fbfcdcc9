// Package deviceplugin is an example Kubernetes device plugin
// (deviceplugin/v1beta1) with simulated devices, for trying allot's device
// manager (or a kubelet) without hardware. Run serves the plugin on
// <dir>/<socket>, registers it at <dir>/kubelet.sock, and registers again
// whenever kubelet.sock is re-created (the node agent restarted). It runs
// in-process (`allot example device-plugin`) or as its own binary
// (examples/device-plugin); both take the flags of Config.AddFlags.
//
// Devices come from a YAML or JSON file (Config.ConfigFile):
//
//	resourceName: example.com/gpu
//	socket: example-gpu.sock
//	preStartRequired: true
//	cdiKind: example.com/gpu
//	devices:
//	- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
//	- {id: gpu-1, numa: 1, path: /dev/null, containerPath: /dev/gpu1}
//
// Health: the control file (Config.Control), polled, lists the IDs of
// unhealthy devices one per line (missing or empty: all healthy); SIGUSR1
// flips the health of every device.
//
// The package uses only public packages and k8s.io/kubelet.
package deviceplugin
