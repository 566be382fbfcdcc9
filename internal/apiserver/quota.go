package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/storage"
)

// Claim quotas are enforced in the transaction that creates or deletes a
// claim: each quota of the namespace is compared by revision and written
// with its new usage, and a per-namespace epoch key is bumped. A quota that
// is created or changed recounts the claims and commits only if the epoch
// did not move meanwhile. So usage never drifts, without a controller.

func (s *Server) quotas(ctx context.Context, ns string) ([]*corev1.ResourceQuota, error) {
	qk := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "resourcequotas"))
	// A serializable read: a linearizable one waits on etcd's raft loop
	// and, under a burst of writes, cost a claim create more than the rest
	// of it. A quota that changed since is caught by the create's
	// transaction, which compares the revision of every quota it charges
	// and is then admitted again with a fresh read (freshKey), as is a
	// refusal.
	res, err := s.store.List(ctx, qk.nsPrefix(ns), storage.ListOptions{Serializable: ctx.Value(freshKey{}) == nil})
	if err != nil {
		return nil, fmt.Errorf("list quotas: %w", err)
	}
	out := make([]*corev1.ResourceQuota, 0, len(res.Items))
	for _, kv := range res.Items {
		obj, err := decodeStored(qk, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out = append(out, obj.(*corev1.ResourceQuota))
	}
	return out, nil
}

// chargeClaimQuota checks the namespace's quotas for one more claim and
// returns the operations that record it.
func (s *Server) chargeClaimQuota(ctx context.Context, c runtime.Object) ([]storage.Op, error) {
	ops, err := s.claimQuotaOps(ctx, c, 1)
	if apierrors.IsForbidden(err) && ctx.Value(freshKey{}) == nil {
		// Refused on a serializable read: make sure with a linearizable
		// one (the limit may just have been raised, or claims deleted).
		return s.claimQuotaOps(context.WithValue(ctx, freshKey{}, true), c, 1)
	}
	return ops, err
}

// releaseQuota returns the operations that give back a deleted object's
// quota.
func (s *Server) releaseQuota(ctx context.Context, k *kind, obj runtime.Object) ([]storage.Op, error) {
	if _, ok := claimQuotaAmounts(obj); !ok {
		return nil, nil
	}
	return s.claimQuotaOps(context.WithValue(ctx, freshKey{}, true), obj, -1)
}

func (s *Server) claimQuotaOps(ctx context.Context, obj runtime.Object, sign int64) ([]storage.Op, error) {
	amounts, ok := claimQuotaAmounts(obj)
	if !ok {
		return nil, nil
	}
	c, _ := meta.Accessor(obj)
	qs, err := s.quotas(ctx, c.GetNamespace())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	ops := []storage.Op{storage.Put(claimEpochPrefix+c.GetNamespace(), []byte(c.GetName()))}
	qk := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "resourcequotas"))
	names := make([]string, 0, len(amounts))
	for n := range amounts {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, q := range qs {
		changed := false
		for _, n := range names {
			name := corev1.ResourceName(n)
			hard, limited := q.Spec.Hard[name]
			if !limited {
				continue
			}
			used := q.Status.Used[name]
			delta := sign * amounts[name]
			next, ok := chargeAmount(corev1.Amount(name, used), corev1.Amount(name, hard), delta)
			if !ok {
				return nil, apierrors.NewForbidden(resourcev1alpha2.Resource("resourceclaims"), c.GetName(),
					fmt.Errorf("exceeded quota: %s, requested: %s=%d, used: %s=%s, limited: %s=%s",
						q.Name, name, delta, name, used.String(), name, hard.String()))
			}
			if q.Status.Used == nil {
				q.Status.Used = corev1.ResourceList{}
			}
			q.Status.Used[name] = *resource.NewQuantity(next, resource.DecimalSI)
			changed = true
		}
		if !changed {
			continue
		}
		rev, _ := revisionOf(q)
		data, err := encodeForStorage(qk, q)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		ops = append(ops, storage.Update(qk.storageKey(q.Namespace, q.Name), data, rev))
	}
	return ops, nil
}

// chargeAmount is the usage after adding delta (negative: a release) to
// used, and whether a charge stays within hard. Amounts are never
// negative (corev1.Amount reads them so); the sum saturates at 2^63-1
// instead of wrapping, and a release never goes below zero. So no claim,
// however large its count, can make the usage small again.
func chargeAmount(used, hard, delta int64) (next int64, ok bool) {
	if delta >= 0 {
		// used+delta <= hard, without computing a sum that may not fit.
		return corev1.AddAmounts(used, delta), delta == 0 || used <= hard-delta
	}
	if used < -delta { // delta is ±an amount >= 0, so -delta does not overflow
		return 0, true
	}
	return used + delta, true
}

// computeQuotaUsage recounts the claims a quota limits, and guards the
// count with the namespace's claim epoch.
func (s *Server) computeQuotaUsage(ctx context.Context, q *corev1.ResourceQuota) ([]storage.Op, error) {
	epoch, err := s.store.Get(ctx, claimEpochPrefix+q.Namespace)
	epochRev := epoch.ModRevision
	if err != nil {
		epochRev = 0
	}
	ck := s.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclaims"))
	res, err := s.store.List(ctx, ck.nsPrefix(q.Namespace), storage.ListOptions{})
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("count claims: %w", err))
	}
	counts := map[corev1.ResourceName]int64{}
	for _, kv := range res.Items {
		obj, _, err := decodeNative(ck, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		amounts, _ := claimQuotaAmounts(obj)
		for n, v := range amounts {
			counts[n] = corev1.AddAmounts(counts[n], v)
		}
	}
	q.Status.Hard = corev1.ResourceList{}
	q.Status.Used = corev1.ResourceList{}
	names := make([]string, 0, len(q.Spec.Hard))
	for n := range q.Spec.Hard {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		q.Status.Hard[name] = q.Spec.Hard[name]
		if isClaimQuotaName(name) || strings.HasPrefix(n, "count/") {
			q.Status.Used[name] = *resource.NewQuantity(counts[name], resource.DecimalSI)
		}
	}
	return []storage.Op{storage.Check(claimEpochPrefix+q.Namespace, epochRev)}, nil
}
