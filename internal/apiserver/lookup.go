package apiserver

import (
	"context"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/apiserver/auth"
	resourcev1 "k8s.io/api/resource/v1"
)

// storeLookup answers the authorizer's questions from etcd.
type storeLookup struct{ s *Server }

func (s *Server) lookup() auth.Lookup { return storeLookup{s} }

func (l storeLookup) GetResourceClass(name string) (*resourcev1alpha2.ResourceClass, error) {
	obj, err := l.s.getObj(context.Background(), l.s.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclasses")), "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*resourcev1alpha2.ResourceClass), nil
}

func (l storeLookup) GetPod(namespace, name string) (*corev1.Pod, error) {
	obj, err := l.s.getObj(context.Background(), l.s.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods")), namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

func (l storeLookup) GetResourceClaim(namespace, name string) (*resourcev1alpha2.ResourceClaim, error) {
	obj, err := l.s.getObj(context.Background(), l.s.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclaims")), namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*resourcev1alpha2.ResourceClaim), nil
}

// GetResourceClaimV1 reads a claim as resource.k8s.io/v1: a claim stored as
// v1alpha2 comes back as resourceconv's view.
func (l storeLookup) GetResourceClaimV1(namespace, name string) (*resourcev1.ResourceClaim, error) {
	obj, err := l.s.getObj(context.Background(), l.s.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims")), namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*resourcev1.ResourceClaim), nil
}
