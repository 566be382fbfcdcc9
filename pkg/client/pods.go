package client

import (
	"context"
	"errors"
	"io"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// ErrNoNamespace is returned by calls about one object given no namespace.
var ErrNoNamespace = errors.New("a namespace is required")

// Bind commits a pod's node, and the allocation and reservation of the
// claims listed in b, in one transaction (POST pods/NAME/binding). It
// returns the resourceVersion of that commit. A binding that lost a race
// fails with a Conflict error.
func (c *Client) Bind(ctx context.Context, ns, pod string, b *corev1.Binding) (string, error) {
	if ns == "" {
		return "", ErrNoNamespace
	}
	st := &metav1.Status{}
	err := c.core.Post().Namespace(ns).Resource("pods").Name(pod).SubResource("binding").
		Body(b).Do(ctx).Into(st)
	if err != nil {
		return "", err
	}
	return st.ResourceVersion, nil
}

// Logs streams a container's log through the API server (pods/NAME/log).
// container may be empty for a pod with one container; tail < 0 means the
// whole log. With follow the stream stays open until ctx ends or the
// container stops; the caller closes the reader.
func (c *Client) Logs(ctx context.Context, ns, pod, container string, follow bool, tail int64) (io.ReadCloser, error) {
	if ns == "" {
		return nil, ErrNoNamespace
	}
	req := c.core.Get().Namespace(ns).Resource("pods").Name(pod).SubResource("log")
	if container != "" {
		req = req.Param("container", container)
	}
	if follow {
		req = req.Param("follow", "true")
	}
	if tail >= 0 {
		req = req.Param("tailLines", strconv.FormatInt(tail, 10))
	}
	return req.Stream(ctx)
}
