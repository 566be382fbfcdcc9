package noderesources

import (
	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// draExtension is the snapshot extension of the DynamicResources plugin
// (dynamicresources.Name), whose objects answer DRAClasses.
const draExtension = "DynamicResources"

// DRAClasses tells whether a DeviceClass maps an extended resource name
// (its spec.extendedResourceName, or deviceclass.resource.kubernetes.io/CLASS):
// the DynamicResources plugin's objects.
type DRAClasses interface {
	ServesExtendedResource(name corev1.ResourceName) bool
}

// ServedByDRA reports whether DRA serves the extended resource name on a
// node whose allocatable is alloc (KEP-5004): the node has none of it (no
// device plugin there advertises it) and a DeviceClass maps it. A node
// whose device plugin advertises the name serves it that way, so one pod
// never gets the same name from both.
func ServedByDRA(name corev1.ResourceName, alloc framework.Resource, dra DRAClasses) bool {
	return dra != nil && alloc.Scalar[name] == 0 && dra.ServesExtendedResource(name)
}
