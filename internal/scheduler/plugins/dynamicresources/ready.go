package dynamicresources

import (
	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// ClaimsReady reports whether every claim of pod is allocated and
// reserved for it, which is what the node agent waits for before it runs
// a pod. A claim counts as ready when lookup (the cluster's view, such as
// an informer's or Objects.Claim) shows it so, or when this plugin's
// binding of the pod that left it so has been committed (PostBind) and
// lookup may not show it yet. A claim lookup does not find, and a
// template entry whose claim is not recorded in the pod's status, are not
// ready. A pod without claims is ready.
func (p *DynamicResources) ClaimsReady(pod *corev1.Pod, lookup func(namespace, name string) (*resourceapi.ResourceClaim, bool)) bool {
	self := podKey(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range pod.Spec.ResourceClaims {
		name, missing, _ := claimName(pod, pc, nil)
		if missing != "" {
			return false
		}
		if m := p.reserved[pod.Namespace+"/"+name]; m != nil && m.pod == self && m.bindRev > 0 {
			continue
		}
		c, ok := lookup(pod.Namespace, name)
		if !ok || c.Status.Allocation == nil || !allocator.ReservedFor(c, pod) {
			return false
		}
	}
	return true
}
