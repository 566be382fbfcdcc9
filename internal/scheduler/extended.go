package scheduler

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
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

// createBindClaims creates the claims fw's BindClaimMakers need for the
// pod's Binding b (the claim of its extended resources served by DRA) and
// lets them name the claims in b. It returns the created claims, for
// deleting them if the binding is refused.
func (s *Scheduler) createBindClaims(ctx context.Context, fw *framework.Framework, state *framework.CycleState, pod *corev1.Pod, b *corev1.Binding) ([]*resourcev1.ResourceClaim, *framework.Status) {
	var created []*resourcev1.ResourceClaim
	for _, m := range fw.BindClaimMakers() {
		c := m.ClaimToCreate(state)
		if c == nil {
			continue
		}
		fail := func(err error) ([]*resourcev1.ResourceClaim, *framework.Status) {
			s.deleteBindClaims(ctx, created)
			return nil, framework.AsStatus(fmt.Errorf("create the claim of pod %s/%s's extended resources: %w", pod.Namespace, pod.Name, err)).WithPlugin(m.Name())
		}
		if s.claims == nil {
			return fail(fmt.Errorf("the scheduler has no claim client"))
		}
		out, err := s.claims.CreateClaim(ctx, c)
		if err != nil {
			return fail(err)
		}
		created = append(created, out)
		if err := m.ClaimCreated(state, b, out); err != nil {
			return fail(err)
		}
	}
	return created, nil
}

// deleteBindClaims deletes claims made for a binding that was refused;
// they have no allocation then (the binding allocates them), so nothing
// else holds them. A failure is logged: the claim's owner, the pod, takes
// it with it when it goes.
func (s *Scheduler) deleteBindClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) {
	if len(claims) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.BindTimeout)
	defer cancel()
	for _, c := range claims {
		if err := s.claims.DeleteClaim(dctx, c.Namespace, c.Name, c.UID); err != nil {
			s.log.Info("delete the claim of a refused binding", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
	}
}
