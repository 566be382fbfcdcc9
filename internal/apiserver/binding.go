package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/internal/storage"
)

// AllocationRevisionKey is the etcd key of the per-(node, driver)
// allocation revision: its ModRevision is the revision of the last
// structured allocation committed for that driver on that node.
func AllocationRevisionKey(node, driver string) string {
	return "/registry/allot.dev/allocationrevisions/" + node + "/" + driver
}

// serveBinding commits a pod's node together with the allocation and
// reservation of its claims in one etcd transaction.
func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	j, err := scheme.ToJSON(body)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	b := &corev1.Binding{}
	if err := scheme.DecodeStrictInto(j, b); err != nil {
		writeError(w, apierrors.NewBadRequest("decode Binding: "+err.Error()))
		return
	}
	if b.Name != "" && b.Name != ri.name {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the binding names pod %q but the URL names %q", b.Name, ri.name)))
		return
	}
	if err := s.authorize(r.Context(), k, ri, "create", b, nil); err != nil {
		writeError(w, err)
		return
	}
	var rev int64
	var cur *corev1.Pod // the pod as a failed attempt's transaction found it
	for i := 0; ; i++ {
		ctx := r.Context()
		if i > 0 && cur == nil {
			ctx = context.WithValue(ctx, freshKey{}, true)
		}
		rev, err = s.bind(ctx, k, ri.namespace, ri.name, b, cur)
		var moved *podMovedError
		if errors.As(err, &moved) && i < maxUpdateRetries {
			cur = moved.pod
			continue
		}
		if i == 0 && cur == nil && refusal(err) {
			// Judged on the watch cache, which may lag behind (a
			// binding just committed): refuse only what fresh reads
			// refuse too.
			continue
		}
		break
	}
	if err != nil {
		writeError(w, err)
		return
	}
	st := statusSuccess(&metav1.StatusDetails{Name: ri.name, Kind: "pods"})
	if rev != 0 { // 0: a dry run, which commits no revision
		st.ResourceVersion = strconv.FormatInt(rev, 10)
	}
	writeObject(w, http.StatusCreated, st)
}

// refusal reports whether err refuses the binding for what it found (bad
// request, invalid, conflict), as opposed to failing to find out.
func refusal(err error) bool {
	return apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err)
}

// podMovedError is a conflict on the pod itself: the binding is tried
// again on pod, the state the failed transaction found, or, when that
// could not be had, with fresh reads of the pod, the node and the claims.
type podMovedError struct{ pod *corev1.Pod }

func (e *podMovedError) Error() string { return "pod changed during binding" }

// podMoved builds the retry of a binding whose pod changed: the failed
// transaction returned the pod's current value (te.Value, nil when the pod
// is gone), so the retry needs no read of its own; a cached copy could
// lag behind it.
func podMoved(podKind *kind, te *storage.TxnError) error {
	if te.Value == nil {
		return &podMovedError{} // deleted meanwhile: the fresh read says so
	}
	obj, err := decodeStored(podKind, te.Value, te.ModRevision)
	if err != nil {
		return &podMovedError{}
	}
	pod, _ := obj.(*corev1.Pod)
	return &podMovedError{pod: pod}
}

func (s *Server) bind(ctx context.Context, podKind *kind, ns, name string, b *corev1.Binding, cur *corev1.Pod) (int64, error) {
	gr := podKind.groupResource()
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return 0, apierrors.NewBadRequest("binding target kind must be Node")
	}
	node := b.Target.Name
	if node == "" {
		return 0, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, name, field.ErrorList{field.Required(field.NewPath("target", "name"), "the node to bind to")})
	}
	// The pod and node come from the watch cache (or cur, on a retry):
	// the transaction below compares the pod's revision, so a stale copy
	// fails it and the binding is retried on the pod that transaction
	// found.
	pod := cur
	if pod == nil {
		obj, err := s.readForBinding(ctx, podKind, ns, name)
		if err != nil {
			return 0, err
		}
		pod = obj.(*corev1.Pod)
	}
	podRev, _ := revisionOf(pod)
	switch {
	case pod.DeletionTimestamp != nil:
		return 0, apierrors.NewConflict(gr, name, errors.New("pod is being deleted"))
	case pod.Spec.NodeName != "" && pod.Spec.NodeName != node:
		return 0, apierrors.NewConflict(gr, name, fmt.Errorf("pod %s is already assigned to node %q", name, pod.Spec.NodeName))
	case pod.Spec.NodeName == node && len(b.ResourceClaims) == 0:
		return 0, apierrors.NewConflict(gr, name, fmt.Errorf("pod %s is already assigned to node %q", name, node))
	}
	if b.ClaimsOnly {
		switch {
		case pod.Spec.NodeName != "":
			return 0, apierrors.NewConflict(gr, name, fmt.Errorf("pod %s is already assigned to node %q; claimsOnly is for a pod without a node", name, pod.Spec.NodeName))
		case len(b.ResourceClaims) == 0:
			return 0, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, name, field.ErrorList{field.Required(field.NewPath("resourceClaims"), "claimsOnly commits claims: list at least one")})
		}
	}
	nodeObj, err := s.readForBinding(ctx, s.reg.get(gvrOf(corev1.SchemeGroupVersion, "nodes")), "", node)
	if err != nil {
		return 0, err
	}
	if err := recordExtendedResourceClaim(gr, pod, b); err != nil {
		return 0, err
	}
	ops, err := s.claimBindingOps(ctx, pod, nodeObj.(*corev1.Node), b)
	if err != nil {
		return 0, err
	}
	podOp, err := bindPodOp(podKind, pod, podRev, node, b)
	if err != nil {
		return 0, err
	}
	ops = append([]storage.Op{podOp}, ops...)
	rev, err := s.commit(ctx, ops)
	if err != nil {
		var te *storage.TxnError
		if errors.As(err, &te) && te.Index == 0 {
			return 0, podMoved(podKind, te) // a stale or changed pod
		}
		if errors.As(err, &te) {
			return 0, apierrors.NewConflict(gr, name, fmt.Errorf("binding failed: %s changed concurrently (%v); recompute and try again", te.Key, te.Reason))
		}
		return 0, apiError(podKind, name, err)
	}
	return rev, nil
}

// bindPodOp is the pod's part of a binding: the pod updated with its node
// and PodScheduled=True, or for a claimsOnly binding a check that it is
// unchanged (or its update when the binding records its extended-resource
// claim, which leaves it pending).
func bindPodOp(podKind *kind, pod *corev1.Pod, podRev int64, node string, b *corev1.Binding) (storage.Op, error) {
	key := podKind.storageKey(pod.Namespace, pod.Name)
	if b.ClaimsOnly && b.ExtendedResourceClaimStatus == nil {
		return storage.Check(key, podRev), nil
	}
	if !b.ClaimsOnly && pod.Spec.NodeName == "" {
		pod.Spec.NodeName = node
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	}
	data, err := encodeForStorage(podKind, pod)
	if err != nil {
		return storage.Op{}, apierrors.NewInternalError(err)
	}
	return storage.Update(key, data, podRev), nil
}

// claimBindingOps prepares the claim writes and allocation fences.
func (s *Server) claimBindingOps(ctx context.Context, pod *corev1.Pod, node *corev1.Node, b *corev1.Binding) ([]storage.Op, error) {
	ck := s.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclaims"))
	fences := map[[2]string]int64{}
	for i, f := range b.AllocationFences {
		rev, err := parseRV(f.Revision)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("allocationFences[%d].revision: %v", i, err))
		}
		fences[[2]string{f.NodeName, f.DriverName}] = rev
	}
	used := map[[2]string]bool{}
	var ops []storage.Op
	for i, bc := range b.ResourceClaims {
		path := field.NewPath("resourceClaims").Index(i)
		op, structured, err := s.bindClaim(ctx, ck, pod, node, bc, path)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		for _, key := range structured {
			used[key] = true
		}
	}
	// Shared fences (devices not local to one node) are the writer's to
	// list; every one listed is checked and moved.
	for key := range fences {
		if key[0] == SharedFenceNode {
			used[key] = true
		}
	}
	keys := make([][2]string, 0, len(used))
	for key := range used {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	for _, key := range keys {
		rev, ok := fences[key]
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("a structured allocation for driver %q on node %q needs an allocationFences entry with the allocation revision the writer has seen", key[1], key[0]))
		}
		fk := AllocationRevisionKey(key[0], key[1])
		ops = append(ops, storage.CheckModRevisionAtMost(fk, rev), storage.Put(fk, []byte(pod.Namespace+"/"+pod.Name)))
	}
	return ops, nil
}

// recordExtendedResourceClaim puts the binding's extendedResourceClaimStatus
// into the pod's status, after checking it against the pod and the
// binding (the claim itself is checked when it is bound:
// checkExtendedResourceClaim). A pod records one such claim, once.
func recordExtendedResourceClaim(gr schema.GroupResource, pod *corev1.Pod, b *corev1.Binding) error {
	st := b.ExtendedResourceClaimStatus
	if st == nil {
		return nil
	}
	if cur := pod.Status.ExtendedResourceClaimStatus; cur != nil {
		if apiequality.Semantic.DeepEqual(cur, st) {
			return nil
		}
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("pod %s already records claim %s for its extended resources", pod.Name, cur.ResourceClaimName))
	}
	path := field.NewPath("extendedResourceClaimStatus")
	errs := validation.ValidateExtendedResourceClaimStatus(st, pod, path)
	if !slices.ContainsFunc(b.ResourceClaims, func(bc corev1.BindingResourceClaim) bool { return bc.Name == st.ResourceClaimName }) {
		errs = append(errs, field.Invalid(path.Child("resourceClaimName"), st.ResourceClaimName, "must be one of the binding's resourceClaims"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, pod.Name, errs)
	}
	pod.Status.ExtendedResourceClaimStatus = st.DeepCopy()
	return nil
}

// keepExtendedResourceClaim keeps a pod's record of its extended-resource
// claim through a write that leaves it out (a writer built before the
// field existed drops it): only a binding sets it, and nothing clears it.
// A write that changes it is refused by validation.
func keepExtendedResourceClaim(obj, cur runtime.Object) {
	p, ok := obj.(*corev1.Pod)
	old, ok2 := cur.(*corev1.Pod)
	if ok && ok2 && p.Status.ExtendedResourceClaimStatus == nil {
		p.Status.ExtendedResourceClaimStatus = old.Status.ExtendedResourceClaimStatus
	}
}

// checkExtendedResourceClaim checks the claim a pod records for its
// extended resources as it is bound: a v1 claim generated for the pod
// (the pod is its controller, the annotation is set) with every request
// the mappings name.
func checkExtendedResourceClaim(pod *corev1.Pod, claim *resourcev1.ResourceClaim, path *field.Path) error {
	ref := metav1.GetControllerOfNoCopy(claim)
	switch {
	case claim.Annotations[corev1.ExtendedResourceClaimAnnotation] != "true":
		return apierrors.NewBadRequest(fmt.Sprintf("%s: claim %s is not made for extended resources: it lacks the annotation %s: \"true\"",
			path.Child("name"), claim.Name, corev1.ExtendedResourceClaimAnnotation))
	case ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.UID != pod.UID:
		return apierrors.NewBadRequest(fmt.Sprintf("%s: claim %s is not generated for pod %s: its controller reference must be the pod",
			path.Child("name"), claim.Name, pod.Name))
	}
	for _, m := range pod.Status.ExtendedResourceClaimStatus.RequestMappings {
		if !slices.ContainsFunc(claim.Spec.Devices.Requests, func(r resourcev1.DeviceRequest) bool { return r.Name == m.RequestName }) {
			return apierrors.NewBadRequest(fmt.Sprintf("extendedResourceClaimStatus: request %q (container %s, %s) is not a request of claim %s",
				m.RequestName, m.ContainerName, m.ResourceName, claim.Name))
		}
	}
	return nil
}

// podUsesClaim reports whether the pod references the claim by name,
// directly or through a template's generated claim, or records it as the
// claim of its extended resources.
func podUsesClaim(pod *corev1.Pod, claim string) bool {
	if pod.ExtendedResourceClaimName() == claim {
		return true
	}
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil && *rc.ResourceClaimName == claim {
			return true
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName == claim {
			return true
		}
	}
	return false
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			if pod.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = pod.Status.Conditions[i].LastTransitionTime
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// readForBinding reads from the watch cache, or from etcd when the cache
// does not have the object (yet) or the binding is being retried.
func (s *Server) readForBinding(ctx context.Context, k *kind, ns, name string) (runtime.Object, error) {
	if ctx.Value(freshKey{}) == nil {
		if obj, err := s.cachedGet(ctx, k, ns, name); err == nil {
			return obj, nil
		}
	}
	return s.getObj(ctx, k, ns, name)
}
