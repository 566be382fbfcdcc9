package client

import (
	resourcev1 "k8s.io/api/resource/v1"

	"allot.dev/allot/pkg/devicemaps"
)

// InternDeviceMaps is the transform (cache.TransformFunc) of the
// factory's ResourceSlice informer: each device's attribute and capacity
// maps are replaced by an equal map the process holds already
// (devicemaps.Shared), so that the devices of homogeneous nodes share a
// few maps, in this informer and every other of the process (the
// scheduler's, the controllers', the allocator's projection of seed
// devices), instead of each holding its own decoded copy.
//
// Objects in an informer's cache are read-only by contract, and here a
// device's maps may be another device's. Other objects pass unchanged.
func InternDeviceMaps(obj any) (any, error) {
	if s, ok := obj.(*resourcev1.ResourceSlice); ok {
		devicemaps.Shared.Slice(s)
	}
	return obj, nil
}
