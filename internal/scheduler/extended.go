package scheduler

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/client"
)

// claimWriter creates and deletes the resource.k8s.io/v1 claims the
// scheduler makes for pods' extended resources served by DRA.
type claimWriter interface {
	CreateClaim(ctx context.Context, c *resourcev1.ResourceClaim) (*resourcev1.ResourceClaim, error)
	DeleteClaim(ctx context.Context, ns, name string, uid types.UID) error
}

// apiClaimWriter is claimWriter through the API server.
type apiClaimWriter struct{ c *client.Client }

func (w apiClaimWriter) CreateClaim(ctx context.Context, c *resourcev1.ResourceClaim) (*resourcev1.ResourceClaim, error) {
	return w.c.ResourceClaimsV1(c.Namespace).Create(ctx, c)
}

func (w apiClaimWriter) DeleteClaim(ctx context.Context, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return w.c.ResourceClaimsV1(ns).Delete(ctx, name, opts)
}

// createExtendedClaim creates the claim of the pod's extended resources
// that DRA serves on its node, when the cycle made one, and names it in
// the Binding b (dynamicresources.ExtendedClaimCreated). It returns the
// created claim, for deleting it if the binding fails.
func (s *Scheduler) createExtendedClaim(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, b *corev1.Binding) (*resourcev1.ResourceClaim, *framework.Status) {
	c := dynamicresources.ExtendedClaimToCreate(state)
	if c == nil {
		return nil, nil
	}
	if s.claims == nil {
		return nil, framework.AsStatus(fmt.Errorf("create the claim of pod %s/%s's extended resources: the scheduler has no claim client", pod.Namespace, pod.Name)).WithPlugin(dynamicresources.Name)
	}
	created, err := s.claims.CreateClaim(ctx, c)
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("create the claim of pod %s/%s's extended resources: %w", pod.Namespace, pod.Name, err)).WithPlugin(dynamicresources.Name)
	}
	if err := dynamicresources.ExtendedClaimCreated(state, b, created); err != nil {
		s.deleteExtendedClaim(ctx, created)
		return nil, framework.AsStatus(err).WithPlugin(dynamicresources.Name)
	}
	return created, nil
}

// deleteExtendedClaim deletes a claim made for a binding that failed; the
// claim has no allocation then (the binding allocates it), so nothing
// else holds it. A failure is logged: the claim's owner, the pod, takes
// it with it when it goes.
func (s *Scheduler) deleteExtendedClaim(ctx context.Context, c *resourcev1.ResourceClaim) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.BindTimeout)
	defer cancel()
	if err := s.claims.DeleteClaim(dctx, c.Namespace, c.Name, c.UID); err != nil {
		s.log.Info("delete the extended-resource claim of a failed binding", "claim", c.Namespace+"/"+c.Name, "err", err)
	}
}
