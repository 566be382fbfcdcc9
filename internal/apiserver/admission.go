package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

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
		if old, ok := old.(*resourcev1alpha2.ResourceClaim); ok && !resourcev1alpha2.IsView(old) {
			if err := onlyBindingAllocatesStructured(o, old); err != nil {
				return nil, err
			}
		}
	case *resourcev1.ResourceClaim:
		if op == admitCreate {
			quota, err := s.chargeClaimQuota(ctx, o)
			return append(ops, quota...), err
		}
		if err := onlyBindingAllocatesV1(o, old.(*resourcev1.ResourceClaim)); err != nil {
			return nil, err
		}
	case *corev1.ResourceQuota:
		quota, err := s.computeQuotaUsage(ctx, o)
		return append(ops, quota...), err
	case *resourcev1.ResourceSlice:
		if op == admitCreate && o.Spec.NodeName != nil && *o.Spec.NodeName != "" {
			return ops, s.refuseDoublePublishing(ctx, k, o.Name, *o.Spec.NodeName, o.Spec.Driver)
		}
	case *resourcev1alpha2.NodeResourceSlice:
		if op == admitCreate {
			return ops, s.refuseDoublePublishing(ctx, k, o.Name, o.Spec.NodeName, o.Spec.DriverName)
		}
	}
	return ops, nil
}

// refuseDoublePublishing refuses a slice of node and driver, k's kind,
// when the driver already publishes that node through the other kind (a
// NodeResourceSlice for a v1 ResourceSlice, and the reverse): the one
// device inventory would count its devices twice. It reads the watch
// cache, so two creates racing may both pass; the allocator then skips
// the v1 slices (allocator.NewInventory).
func (s *Server) refuseDoublePublishing(ctx context.Context, k *kind, name, node, driver string) error {
	other, driverField := gvrOf(resourcev1alpha2.SchemeGroupVersion, "noderesourceslices"), "spec.driverName"
	how, fix := "a NodeResourceSlice (allot's node API)", "resource.k8s.io/v1 ResourceSlices"
	if k.resource == "noderesourceslices" {
		other, driverField = gvrOf(resourcev1.SchemeGroupVersion, "resourceslices"), resourcev1.ResourceSliceSelectorDriver
		how, fix = "resource.k8s.io/v1 ResourceSlices (the kubelet's DRA API)", "a NodeResourceSlice"
	}
	otherKind := s.reg.get(other)
	if otherKind == nil {
		return nil
	}
	found, _, err := s.listFromCache(ctx, otherKind, "", "0", func(d storage.Decoded) bool {
		return d.Fields["spec.nodeName"] == node && d.Fields[driverField] == driver
	})
	if err != nil || len(found) == 0 {
		return nil // the allocator's backstop remains
	}
	return apierrors.NewConflict(k.groupResource(), name, fmt.Errorf(
		"driver %s already publishes node %s through %s; a driver publishes a node's devices through one API only, "+
			"since the allocator would count them twice: delete those before publishing through %s", driver, node, how, fix))
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
	if paths := adminAccessRequests(obj); len(paths) > 0 && ns.Labels[resourcev1.DRAAdminNamespaceLabelKey] != "true" {
		if !fresh { // the cache may not have the label yet: refuse on etcd's copy only
			return s.admitNamespace(ctx, k, obj, true)
		}
		var errs field.ErrorList
		for _, p := range paths {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("admin access to devices requires the label %s: \"true\" on namespace %s",
				resourcev1.DRAAdminNamespaceLabelKey, ns.Name)))
		}
		return storage.Op{}, apierrors.NewInvalid(k.gvk.GroupKind(), acc.GetName(), errs)
	}
	rev, _ := revisionOf(ns)
	return storage.Check(nsKind.storageKey("", ns.Name), rev), nil
}

// adminAccessRequests are the paths of the requests of a v1 claim or
// claim template that ask for admin access: allowed only in namespaces
// labelled resource.kubernetes.io/admin-access: "true", as in
// Kubernetes. The create's transaction checks the namespace's revision,
// so a label removed meanwhile fails it.
func adminAccessRequests(obj runtime.Object) []*field.Path {
	var spec *resourcev1.ResourceClaimSpec
	path := field.NewPath("spec")
	switch o := obj.(type) {
	case *resourcev1.ResourceClaim:
		spec = &o.Spec
	case *resourcev1.ResourceClaimTemplate:
		spec, path = &o.Spec.Spec, path.Child("spec")
	default:
		return nil
	}
	var out []*field.Path
	reqs := path.Child("devices", "requests")
	for i, r := range spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
			out = append(out, reqs.Index(i).Child("exactly", "adminAccess"))
		}
	}
	return out
}

var errNotCached = errors.New("not read from the cache")

// freshKey in a context makes admission read etcd instead of the caches.
type freshKey struct{}

// Quota resource names for claims.
const (
	quotaClaimsTotal       corev1.ResourceName = "count/resourceclaims.resource.k8s.io"
	quotaClassSuffix                           = ".resourceclass.resource.k8s.io/resourceclaims"
	quotaDeviceClassSuffix                     = ".deviceclass.resource.k8s.io/devices"
	// quotaImplicitExtendedPrefix names the quota of a DeviceClass's
	// implicit extended resource, requests.deviceclass.resource.kubernetes.io/CLASS.
	quotaImplicitExtendedPrefix = "requests.deviceclass.resource.kubernetes.io/"
	claimEpochPrefix            = "/registry/allot.dev/claimepochs/"
)

func classQuotaName(class string) corev1.ResourceName {
	return corev1.ResourceName(class + quotaClassSuffix)
}

// deviceClassQuotaName is upstream's quota resource for the devices a
// resource.k8s.io/v1 claim requests of a DeviceClass.
func deviceClassQuotaName(class string) corev1.ResourceName {
	return corev1.ResourceName(class + quotaDeviceClassSuffix)
}

// claimQuotaAmounts are the quota resources a claim of either version
// counts in, and how much: a v1alpha2 claim counts 1 in the claims total
// and in its class; a v1 claim counts 1 in the total and, per DeviceClass,
// the devices it requests, as Kubernetes counts them: count for
// ExactCount, AllocationResultsMaxSize for All, and for firstAvailable the
// most any one alternative asks of the class. Those devices count in the
// class's implicit extended resource too
// (requests.deviceclass.resource.kubernetes.io/CLASS), as Kubernetes
// counts a claim's devices whose pod did not pay for them by its own
// requests (allot does not charge pods' requests): so the devices a pod
// gets through deviceclass.resource.kubernetes.io/CLASS, whose claim the
// scheduler makes, count in both. ok is false for other objects.
func claimQuotaAmounts(obj runtime.Object) (map[corev1.ResourceName]int64, bool) {
	switch c := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		return map[corev1.ResourceName]int64{quotaClaimsTotal: 1, classQuotaName(c.Spec.ResourceClassName): 1}, true
	case *resourcev1.ResourceClaim:
		out := map[corev1.ResourceName]int64{quotaClaimsTotal: 1}
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil {
				n := deviceClassQuotaName(r.Exactly.DeviceClassName)
				out[n] = corev1.AddAmounts(out[n], devicesRequested(r.Exactly.AllocationMode, r.Exactly.Count))
				continue
			}
			most := map[string]int64{}
			for _, sub := range r.FirstAvailable {
				most[sub.DeviceClassName] = max(most[sub.DeviceClassName], devicesRequested(sub.AllocationMode, sub.Count))
			}
			for class, n := range most {
				out[deviceClassQuotaName(class)] = corev1.AddAmounts(out[deviceClassQuotaName(class)], n)
			}
		}
		for n, v := range out {
			if class, ok := strings.CutSuffix(string(n), quotaDeviceClassSuffix); ok {
				out[corev1.ResourceName(quotaImplicitExtendedPrefix+class)] = v
			}
		}
		return out, true
	}
	return nil, false
}

// devicesRequested is how many devices a request counts in quota. Count
// is at most AllocationResultsMaxSize (validation); a larger one, stored
// before that bound, counts as what it asks for, never less.
func devicesRequested(mode resourcev1.DeviceAllocationMode, count int64) int64 {
	if mode == resourcev1.DeviceAllocationModeAll {
		return resourcev1.AllocationResultsMaxSize
	}
	return max(count, 1)
}

func isClaimQuotaName(n corev1.ResourceName) bool {
	return n == quotaClaimsTotal || strings.HasSuffix(string(n), quotaClassSuffix) || strings.HasSuffix(string(n), quotaDeviceClassSuffix) ||
		strings.HasPrefix(string(n), quotaImplicitExtendedPrefix)
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

// onlyBindingAllocatesV1 refuses status writes that set or change the
// allocation of a resource.k8s.io/v1 claim: every v1 allocation is
// structured, written only through pods/binding. Clearing one
// (deallocation, by the claim controller) is allowed.
func onlyBindingAllocatesV1(c, old *resourcev1.ResourceClaim) error {
	if resourcev1alpha2.IsView(old) {
		return nil // unview checks the stored claim
	}
	a := c.Status.Allocation
	if a == nil || apiequality.Semantic.DeepEqual(a, old.Status.Allocation) {
		return nil
	}
	return apierrors.NewForbidden(resourcev1.Resource("resourceclaims"), c.Name,
		fmt.Errorf("status.allocation: allocations are written only through the pods/binding subresource, which fences them against double allocation"))
}
