package dra

import (
	"context"
	"errors"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
)

// Binding conditions: a pod whose new allocations hold devices with
// binding conditions is bound in two steps (framework.PreBindExtension).
// The wait reads the claim informer, never the API server; the release
// after a failure writes each claim's status.

var _ framework.PreBindExtension = (*Extension)(nil)

// bindingPoll is how often a waiting pod's claims are read from the
// informer's cache (a local read, no API call).
const bindingPoll = 100 * time.Millisecond

// TwoStep: the pod's new allocations have devices with binding
// conditions; the message names them and the conditions.
func (e *Extension) TwoStep(state *framework.CycleState, _ *corev1.Pod) string {
	claims := dynamicresources.BindingClaims(state)
	if len(claims) == 0 {
		return ""
	}
	return dynamicresources.BindingWaitMessage(claims, nil)
}

// Committed: the binding that follows only reserves the claims.
func (e *Extension) Committed(state *framework.CycleState) { dynamicresources.ClaimsCommitted(state) }

// PreBind waits until every binding condition of the pod's claims is
// True in their status, as the claim informer shows them. It gives up
// (Unschedulable, naming why) when a claim is deleted or deallocated, a
// binding failure condition turns True, a device is tainted NoSchedule or
// NoExecute without a toleration, the pod's node goes away, or ctx ends
// (the binding-conditions timeout).
func (e *Extension) PreBind(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeGone func() bool) *framework.Status {
	claims := e.waitingClaims(state)
	if len(claims) == 0 {
		return nil
	}
	tick := time.NewTicker(bindingPoll)
	defer tick.Stop()
	seen := make([]bool, len(claims))
	for {
		ready, err := e.bindingReady(pod, claims, seen)
		switch {
		case err != nil:
			return bindingFailed("%v", err)
		case ready:
			return nil
		case nodeGone():
			return bindingFailed("node %s was removed while the pod waited for its binding conditions", pod.Spec.NodeName)
		}
		select {
		case <-ctx.Done():
			cur := map[string]*resourcev1.ResourceClaim{}
			for _, c := range claims {
				cur[c.Name] = e.v1Claim(c.Namespace, c.Name)
			}
			return bindingFailed("timed out %s", dynamicresources.BindingWaitMessage(claims, cur))
		case <-tick.C:
		}
	}
}

// waitingClaims are the claims the first step committed with binding
// conditions (the state still says which: BindingClaims reads them before
// Committed marks the state).
func (e *Extension) waitingClaims(state *framework.CycleState) []*resourcev1.ResourceClaim {
	return dynamicresources.CommittedBindingClaims(state)
}

func bindingFailed(format string, args ...any) *framework.Status {
	return framework.NewStatus(framework.Unschedulable, dynamicresources.ReasonBindingConditions).
		WithDetail(format, args...).WithPlugin(dynamicresources.Name)
}

// bindingReady judges every waiting claim on the informer's view. A claim
// is judged only once the informer has shown it past the first step
// (seen): until then the informer lags behind the binding.
func (e *Extension) bindingReady(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, seen []bool) (bool, error) {
	var objs *dynamicresources.Objects
	if e.src != nil {
		o, err := e.src.objects()
		if err != nil {
			return false, nil // read again at the next tick
		}
		objs = o
	}
	ready := true
	for i, c := range claims {
		cur := e.v1Claim(c.Namespace, c.Name)
		if !seen[i] {
			if !dynamicresources.PastCommit(cur, c, pod) {
				ready = false
				continue
			}
			seen[i] = true
		}
		ok, err := dynamicresources.BindingVerdict(pod, c, cur, objs)
		if err != nil {
			return false, err
		}
		ready = ready && ok
	}
	return ready, nil
}

// v1Claim reads a v1 claim from the informer; nil when it is not there.
func (e *Extension) v1Claim(ns, name string) *resourcev1.ResourceClaim {
	if e.src == nil || e.src.V1 == nil {
		return nil
	}
	c, err := e.src.V1.Claims.Get(ns, name)
	if err != nil {
		return nil
	}
	return c
}

// Release undoes the first step: every claim it allocated for the pod is
// deallocated (allocation, the devices' status and the pod's
// reservation cleared in one status write), unless it changed to another
// allocation or is reserved for other pods too (then only the pod's
// reservation goes). The claim's event moves the pod.
func (e *Extension) Release(ctx context.Context, state *framework.CycleState, pod *corev1.Pod) {
	for _, c := range dynamicresources.CommittedBindingClaims(state) {
		if err := e.release(ctx, pod, c); err != nil {
			e.log.Warn("release the allocation of a pod whose binding failed", "pod", pod.Namespace+"/"+pod.Name, "claim", c.Name, "err", err)
		}
	}
}

func (e *Extension) release(ctx context.Context, pod *corev1.Pod, chosen *resourcev1.ResourceClaim) error {
	if e.client == nil {
		return errNoClient
	}
	claims := e.client.ResourceClaimsV1(chosen.Namespace)
	for range 5 { // conflicts: a driver writing status.devices meanwhile
		actx, cancel := context.WithTimeout(ctx, e.apiTimeout)
		cur, err := claims.Get(actx, chosen.Name)
		cancel()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		upd, changed := dynamicresources.ReleaseClaim(cur, chosen, pod)
		if !changed {
			return nil
		}
		actx, cancel = context.WithTimeout(ctx, e.apiTimeout)
		_, err = claims.UpdateStatus(actx, upd)
		cancel()
		if err == nil {
			e.log.Info("released the allocation of a pod whose binding failed", "pod", pod.Namespace+"/"+pod.Name, "claim", chosen.Name,
				"deallocated", upd.Status.Allocation == nil)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return errors.New("claim kept changing")
}
