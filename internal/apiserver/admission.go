package apiserver

import (
	"context"
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
	if op == admitCreate && k.namespaced {
		if err := s.admitNamespace(ctx, k, obj); err != nil {
			return nil, err
		}
	}
	switch o := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		if op == admitCreate {
			return s.chargeClaimQuota(ctx, o)
		}
		if err := onlyBindingAllocatesStructured(o, old.(*resourcev1alpha2.ResourceClaim)); err != nil {
			return nil, err
		}
	case *corev1.ResourceQuota:
		return s.computeQuotaUsage(ctx, o)
	}
	return nil, nil
}

// admitNamespace refuses objects in a namespace that does not exist or is
// being deleted (events excepted, so deletion can still be reported).
func (s *Server) admitNamespace(ctx context.Context, k *kind, obj runtime.Object) error {
	acc, _ := meta.Accessor(obj)
	nsKind := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "namespaces"))
	// The watch cache answers without an etcd round trip; a namespace it
	// does not know yet (just created) is looked up in etcd.
	cur, err := s.cachedGet(ctx, nsKind, "", acc.GetNamespace())
	if apierrors.IsNotFound(err) {
		cur, err = s.getObj(ctx, nsKind, "", acc.GetNamespace())
	}
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(nsKind.groupResource(), acc.GetNamespace())
	}
	if err != nil {
		return err
	}
	ns := cur.(*corev1.Namespace)
	if ns.DeletionTimestamp != nil && !(k.gvk.Group == "" && k.resource == "events") {
		return apierrors.NewForbidden(k.groupResource(), acc.GetName(),
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	return nil
}

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
