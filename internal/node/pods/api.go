package pods

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// ClientAPI is the API of pod workers over an allot client.
func ClientAPI(c *client.Client) API { return clientAPI{c} }

type clientAPI struct{ c *client.Client }

func (a clientAPI) UpdatePodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	out, err := a.c.Pods(pod.Namespace).UpdateStatus(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return out, nil
}

func (a clientAPI) GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	out, err := a.c.Pods(ns).Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	return out, nil
}

func (a clientAPI) DeletePod(ctx context.Context, ns, name string, uid types.UID) error {
	zero := int64(0)
	err := a.c.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}
