package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/storage"
)

type admitOp int

const (
	admitCreate admitOp = iota
	admitUpdate
)

// admit applies the admission rules that need the cluster's state and
// returns extra operations to commit in the same transaction as the write.
func (s *Server) admit(ctx context.Context, k *kind, op admitOp, obj, old runtime.Object) ([]storage.Op, error) {
	var ops []storage.Op
	if op == admitCreate && k.namespaced {
		check, err := s.admitNamespace(ctx, k, obj, ctx.Value(freshKey{}) != nil)
		if err != nil {
			return nil, err
		}
		ops = append(ops, check)
	}
	switch o := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		if op == admitCreate {
			quota, err := s.chargeClaimQuota(ctx, o)
			return append(ops, quota...), err
		}
		if err := onlyBindingAllocatesStructured(o, old.(*resourcev1alpha2.ResourceClaim)); err != nil {
			return nil, err
		}
	case *corev1.ResourceQuota:
		quota, err := s.computeQuotaUsage(ctx, o)
		return append(ops, quota...), err
	}
	return ops, nil
}

// admitNamespace refuses objects in a namespace that does not exist or is
// being deleted (events excepted, so deletion can still be reported). It
// reads the watch cache and returns a check of the namespace's revision for
// the create's transaction: if the cached copy was stale the transaction
// fails and the create is admitted again from etcd (fresh).
func (s *Server) admitNamespace(ctx context.Context, k *kind, obj runtime.Object, fresh bool) (storage.Op, error) {
	acc, _ := meta.Accessor(obj)
	nsKind := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "namespaces"))
	var cur runtime.Object
	err := errNotCached
	if !fresh {
		cur, err = s.cachedGet(ctx, nsKind, "", acc.GetNamespace())
	}
	if err != nil {
		cur, err = s.getObj(ctx, nsKind, "", acc.GetNamespace())
	}
	if apierrors.IsNotFound(err) {
		return storage.Op{}, apierrors.NewNotFound(nsKind.groupResource(), acc.GetNamespace())
	}
	if err != nil {
		return storage.Op{}, err
	}
	ns := cur.(*corev1.Namespace)
	if ns.DeletionTimestamp != nil && !(k.gvk.Group == "" && k.resource == "events") {
		return storage.Op{}, apierrors.NewForbidden(k.groupResource(), acc.GetName(),
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	rev, _ := revisionOf(ns)
	return storage.Check(nsKind.storageKey("", ns.Name), rev), nil
}

var errNotCached = errors.New("not read from the cache")

// freshKey in a context makes admission read etcd instead of the caches.
type freshKey struct{}

// Quota resource names for claims.
const (
	quotaClaimsTotal corev1.ResourceName = "count/resourceclaims.resource.k8s.io"
	quotaClassSuffix                     = ".resourceclass.resource.k8s.io/resourceclaims"
	claimEpochPrefix                     = "/registry/allot.dev/claimepochs/"
)

func classQuotaName(class string) corev1.ResourceName {
	return corev1.ResourceName(class + quotaClassSuffix)
}

// quotaNamesFor are the quota resources a claim of the class counts in.
func quotaNamesFor(class string) []corev1.ResourceName {
	return []corev1.ResourceName{quotaClaimsTotal, classQuotaName(class)}
}

func isClaimQuotaName(n corev1.ResourceName) bool {
	return n == quotaClaimsTotal || strings.HasSuffix(string(n), quotaClassSuffix)
}

// onlyBindingAllocatesStructured refuses status writes that set or change a
// structured allocation: those go through pods/binding, where the
// per-(node, driver) allocation revision fences them. Clearing one
// (deallocation) is allowed.
func onlyBindingAllocatesStructured(c, old *resourcev1alpha2.ResourceClaim) error {
	a := c.Status.Allocation
	if a == nil || apiequality.Semantic.DeepEqual(a, old.Status.Allocation) {
		return nil
	}
	for _, h := range a.ResourceHandles {
		if h.StructuredData != nil {
			return apierrors.NewForbidden(resourcev1alpha2.Resource("resourceclaims"), c.Name,
				fmt.Errorf("status.allocation: structured allocations are written only through the pods/binding subresource, which fences them against double allocation"))
		}
	}
	return nil
}
