package main

import (
	"bytes"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
)

// describe lists the claim made for a pod's extended resources under
// Resource Claims, one line per container and resource, even for a pod
// without spec.resourceClaims.
func TestDescribePodExtendedResourceClaim(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "p-extended-resources-x",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{
			{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"},
		},
	}}}
	var b bytes.Buffer
	w := newDescribeWriter(&b)
	describePodClaims(w, pod)
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Resource Claims:", "example.com/gpu (container main):", "claim p-extended-resources-x, request container-0-request-0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
}
