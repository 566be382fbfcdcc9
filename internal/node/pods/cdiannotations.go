package pods

import (
	"context"
	"fmt"

	"tags.cncf.io/container-device-interface/pkg/cdi"

	corev1 "allot.dev/allot/api/core/v1"
)

// CDIAnnotations injects the CDI devices a pod asks for with annotations
// in the CDI convention that containerd and CRI-O follow
// ("cdi.k8s.io/KEY: vendor.com/class=device[,...]") into every container
// of the pod. Device plugins and DRA drivers hand over CDI devices through
// their own hooks; these annotations let a user or an operator request a
// device directly.
type CDIAnnotations struct{}

var _ ContainerConfigurer = CDIAnnotations{}

// ContainerOptions parses the pod's CDI annotations.
func (CDIAnnotations) ContainerOptions(_ context.Context, pod *corev1.Pod, _ *corev1.Container) (ContainerOptions, error) {
	if len(pod.Annotations) == 0 {
		return ContainerOptions{}, nil
	}
	_, devices, err := cdi.ParseAnnotations(pod.Annotations)
	if err != nil {
		return ContainerOptions{}, fmt.Errorf("parse CDI annotations: %w", err)
	}
	return ContainerOptions{CDIDevices: devices}, nil
}
