package main

import (
	"crypto/sha256"
	"fmt"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The published device: gpu-INDEX, with these attributes and capacity.
const (
	devicePrefix = "gpu-"
	deviceModel  = "UPSTREAM-GPU"
	deviceMemory = "16Gi"
)

// deviceName is the name of GPU index.
func deviceName(index int) string {
	return devicePrefix + strconv.Itoa(index)
}

// deviceUUID is a stable, node-unique UUID (version 5 layout) for a GPU.
func deviceUUID(node string, index int) string {
	sum := sha256.Sum256([]byte(node + "/" + deviceName(index)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// devices are the node's GPUs as ResourceSlice devices.
func devices(node string, gpus int) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, gpus)
	for i := range gpus {
		out = append(out, resourceapi.Device{
			Name: deviceName(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To(deviceModel)},
				"uuid":  {StringValue: ptr.To(deviceUUID(node, i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse(deviceMemory)},
			},
		})
	}
	return out
}
