package apiserver

import (
	"fmt"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/internal/storage"
	"allot.dev/allot/pkg/allocator"
)

// builtinKinds lists every kind served without a CRD.
func builtinKinds() []*kind {
	core := corev1.SchemeGroupVersion
	res := resourcev1alpha2.SchemeGroupVersion
	ext := apiextv1.SchemeGroupVersion
	v1 := resourcev1.SchemeGroupVersion
	kinds := []*kind{
		{gvk: core.WithKind("Namespace"), resource: "namespaces", shortNames: []string{"ns"}, hasStatus: true, onCreate: dropStatusOnCreate,
			newObj: func() runtime.Object { return &corev1.Namespace{} }, prepareCreate: prepareNamespace,
			columns: namespaceColumns, row: namespaceRow},
		{gvk: core.WithKind("Node"), resource: "nodes", shortNames: []string{"no"}, hasStatus: true, onCreate: keepStatusOnCreate,
			newObj: func() runtime.Object { return &corev1.Node{} }, columns: nodeColumns, row: nodeRow},
		{gvk: core.WithKind("Pod"), resource: "pods", shortNames: []string{"po"}, namespaced: true, hasStatus: true, onCreate: dropStatusOnCreate,
			categories: []string{"all"}, newObj: func() runtime.Object { return &corev1.Pod{} },
			prepareCreate: preparePod, fields: podFields, lightDecode: lightPodDecode, columns: podColumns, row: podRow},
		{gvk: core.WithKind("Event"), resource: "events", shortNames: []string{"ev"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Event{} }, fields: eventFields, columns: eventColumns, row: eventRow},
		{gvk: core.WithKind("ResourceQuota"), resource: "resourcequotas", shortNames: []string{"quota"}, namespaced: true, hasStatus: true, onCreate: dropStatusOnCreate,
			newObj: func() runtime.Object { return &corev1.ResourceQuota{} }, columns: quotaColumns, row: quotaRow},
		{gvk: res.WithKind("ResourceClass"), resource: "resourceclasses",
			newObj: func() runtime.Object { return &resourcev1alpha2.ResourceClass{} }, columns: classColumns, row: classRow},
		{gvk: res.WithKind("ResourceClaim"), resource: "resourceclaims", namespaced: true, hasStatus: true, onCreate: dropStatusOnCreate,
			newObj: func() runtime.Object { return &resourcev1alpha2.ResourceClaim{} }, fields: claimFields,
			columns: claimColumns, row: claimRow},
		{gvk: res.WithKind("ResourceClaimTemplate"), resource: "resourceclaimtemplates", namespaced: true,
			newObj: func() runtime.Object { return &resourcev1alpha2.ResourceClaimTemplate{} }, columns: ageColumns, row: ageRow},
		{gvk: res.WithKind("PodSchedulingContext"), resource: "podschedulingcontexts", namespaced: true, hasStatus: true, onCreate: dropStatusOnCreate,
			newObj: func() runtime.Object { return &resourcev1alpha2.PodSchedulingContext{} }, columns: schedCtxColumns, row: schedCtxRow},
		{gvk: res.WithKind("NodeResourceSlice"), resource: "noderesourceslices",
			newObj: func() runtime.Object { return &resourcev1alpha2.NodeResourceSlice{} }, fields: sliceFields,
			columns: sliceColumns, row: sliceRow},
		{gvk: res.WithKind("ResourceClaimParameters"), resource: "resourceclaimparameters", namespaced: true,
			newObj: func() runtime.Object { return &resourcev1alpha2.ResourceClaimParameters{} }, columns: paramsColumns, row: claimParamsRow},
		{gvk: res.WithKind("ResourceClassParameters"), resource: "resourceclassparameters",
			newObj: func() runtime.Object { return &resourcev1alpha2.ResourceClassParameters{} }, columns: paramsColumns, row: classParamsRow},
		{gvk: v1.WithKind("DeviceClass"), resource: "deviceclasses",
			newObj: func() runtime.Object { return &resourcev1.DeviceClass{} }, columns: ageColumns, row: ageRow},
		{gvk: v1.WithKind("ResourceSlice"), resource: "resourceslices", prepareCreate: stampTaints,
			newObj: func() runtime.Object { return &resourcev1.ResourceSlice{} }, fields: resourceSliceFields,
			columns: resourceSliceColumns, row: resourceSliceRow},
		{gvk: v1.WithKind("ResourceClaim"), resource: "resourceclaims", namespaced: true, hasStatus: true, onCreate: dropStatusOnCreate,
			newObj: func() runtime.Object { return &resourcev1.ResourceClaim{} }, viewFields: claimV1ViewFields,
			columns: claimV1Columns, row: claimV1Row},
		{gvk: v1.WithKind("ResourceClaimTemplate"), resource: "resourceclaimtemplates", namespaced: true,
			newObj: func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} }, columns: ageColumns, row: ageRow},
		{gvk: v1.WithKind("DeviceTaintRule"), resource: "devicetaintrules", hasStatus: true, onCreate: dropStatusOnCreate, prepareCreate: stampTaints,
			newObj: func() runtime.Object { return &resourcev1.DeviceTaintRule{} }, columns: ageColumns, row: ageRow},
		{gvk: coordinationv1.SchemeGroupVersion.WithKind("Lease"), resource: "leases", namespaced: true,
			newObj: func() runtime.Object { return &coordinationv1.Lease{} }, columns: leaseColumns, row: leaseRow},
		{gvk: ext.WithKind("CustomResourceDefinition"), resource: "customresourcedefinitions", shortNames: []string{"crd", "crds"}, hasStatus: true, onCreate: dropStatusOnCreate,
			newObj: func() runtime.Object { return &apiextv1.CustomResourceDefinition{} }, prepareCreate: prepareCRD,
			columns: crdColumns, row: crdRow},
	}
	for _, k := range kinds {
		k.singular = lowerKind(k.gvk.Kind)
		finishBuiltin(k)
	}
	linkSiblings(kinds)
	return kinds
}

// finishBuiltin wires defaulting and validation of typed kinds.
func finishBuiltin(k *kind) {
	prep := k.prepareCreate
	hasStatus := k.hasStatus
	k.prepareCreate = func(obj runtime.Object) {
		if prep != nil {
			prep(obj)
		}
		dropViewMark(obj)
		validation.Default(obj)
	}
	k.prepareUpdate = func(obj, old runtime.Object) {
		if hasStatus {
			keepStatus(obj, old)
		}
		keepNamespaceFinalizers(obj, old)
		bumpRuleTaintTime(obj, old)
		keepSliceTaintTimes(obj, old)
		stampTaints(obj)
		validation.Default(obj)
	}
	k.validate = func(obj runtime.Object) field.ErrorList {
		return append(validation.Validate(obj), seedNameCollisions(obj)...)
	}
	k.validateUpd = func(obj, old runtime.Object) field.ErrorList {
		return append(validation.ValidateUpdate(obj, old), seedNameCollisions(obj)...)
	}
	k.validateStat = func(obj, old runtime.Object) field.ErrorList { return validation.ValidateStatusUpdate(obj, old) }
}

// seedNameCollisions refuses a NodeResourceSlice two of whose leaves
// would be one resource.k8s.io/v1 device (instance IDs "a/b" and "a--b"
// both name device a--b): the one device inventory could not tell them
// apart. Leaves whose v1 name is merely not a DNS label (too long, dots)
// are allowed: they are offered to v1alpha2 claims only (see
// allocator.SeedDevices).
func seedNameCollisions(obj runtime.Object) field.ErrorList {
	s, ok := obj.(*resourcev1alpha2.NodeResourceSlice)
	if !ok {
		return nil
	}
	var out field.ErrorList
	for _, e := range allocator.ValidateSeedDeviceNames(s) {
		if e.Type == field.ErrorTypeDuplicate {
			out = append(out, e)
		}
	}
	return out
}

// preparePod starts a new pod Pending (the client's status was dropped).
func preparePod(obj runtime.Object) {
	obj.(*corev1.Pod).Status.Phase = corev1.PodPending
}

// keepNamespaceFinalizers keeps a namespace's spec.finalizers in an
// update of its main resource, as Kubernetes does: only
// namespaces/NAME/finalize (the namespace controller's, and admins')
// changes them. Dropping them by PUT or patch would make a DELETE remove
// the namespace at once, leaving its pods and claims (and the devices
// they hold) behind for a namespace of the same name to inherit.
func keepNamespaceFinalizers(obj, old runtime.Object) {
	ns, ok := obj.(*corev1.Namespace)
	stored, ok2 := old.(*corev1.Namespace)
	if ok && ok2 {
		ns.Spec.Finalizers = slices.Clone(stored.Spec.Finalizers)
	}
}

func prepareNamespace(obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	if len(ns.Spec.Finalizers) == 0 {
		ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
	}
}

func podFields(obj runtime.Object) fields.Set {
	p := obj.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName": p.Spec.NodeName, "spec.schedulerName": p.Spec.SchedulerName,
		"status.phase": string(p.Status.Phase), "spec.restartPolicy": string(p.Spec.RestartPolicy),
	}
}

func eventFields(obj runtime.Object) fields.Set {
	e := obj.(*corev1.Event)
	return fields.Set{
		"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.name": e.InvolvedObject.Name,
		"involvedObject.namespace": e.InvolvedObject.Namespace, "involvedObject.uid": e.InvolvedObject.UID,
		"reason": e.Reason, "type": e.Type, "source": e.Source.Component,
	}
}

func claimFields(obj runtime.Object) fields.Set {
	c := obj.(*resourcev1alpha2.ResourceClaim)
	return fields.Set{"spec.resourceClassName": c.Spec.ResourceClassName, "status.driverName": c.Status.DriverName}
}

// claimV1ViewFields is claimFields of a v1 claim's v1alpha2 view
// (resourceconv.ClaimToV1alpha2): a view has no spec, and its driverName
// is the driver of the allocation's results when they all have one.
func claimV1ViewFields(obj runtime.Object) fields.Set {
	c := obj.(*resourcev1.ResourceClaim)
	driver := ""
	if a := c.Status.Allocation; a != nil {
		for i, r := range a.Devices.Results {
			if i > 0 && r.Driver != driver {
				driver = ""
				break
			}
			driver = r.Driver
		}
	}
	return fields.Set{"spec.resourceClassName": "", "status.driverName": driver}
}

func sliceFields(obj runtime.Object) fields.Set {
	s := obj.(*resourcev1alpha2.NodeResourceSlice)
	return fields.Set{"spec.nodeName": s.Spec.NodeName, "spec.driverName": s.Spec.DriverName}
}

// stampTaints sets timeAdded of v1 device taints that lack it, as
// Kubernetes does on create and update.
func stampTaints(obj runtime.Object) {
	now := metav1.Now()
	stamp := func(t *resourcev1.DeviceTaint) {
		if t.TimeAdded == nil {
			t.TimeAdded = &now
		}
	}
	switch o := obj.(type) {
	case *resourcev1.ResourceSlice:
		for i := range o.Spec.Devices {
			for j := range o.Spec.Devices[i].Taints {
				stamp(&o.Spec.Devices[i].Taints[j])
			}
		}
	case *resourcev1.DeviceTaintRule:
		stamp(&o.Spec.Taint)
	}
}

// bumpRuleTaintTime restarts a DeviceTaintRule's timeAdded when an update
// changes the effect and leaves the time as it was, as Kubernetes does:
// the time says since when the effect applies, and NoExecute tolerations
// count from it (a rule switched from None to NoExecute does not evict
// pods at once because it was created long ago). Whole seconds, as the
// encoding keeps them.
func bumpRuleTaintTime(obj, old runtime.Object) {
	r, ok1 := obj.(*resourcev1.DeviceTaintRule)
	o, ok2 := old.(*resourcev1.DeviceTaintRule)
	if !ok1 || !ok2 || r.Spec.Taint.Effect == o.Spec.Taint.Effect || !r.Spec.Taint.TimeAdded.Equal(o.Spec.Taint.TimeAdded) {
		return
	}
	r.Spec.Taint.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
}

// keepSliceTaintTimes gives a device taint republished without timeAdded
// the time of the same taint (key, value, effect) of the same device in
// the stored slice, so that a driver rewriting its slice does not restart
// the NoExecute tolerations of the pods on a tainted device each time.
func keepSliceTaintTimes(obj, old runtime.Object) {
	s, ok1 := obj.(*resourcev1.ResourceSlice)
	o, ok2 := old.(*resourcev1.ResourceSlice)
	if !ok1 || !ok2 {
		return
	}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		j := slices.IndexFunc(o.Spec.Devices, func(od resourcev1.Device) bool { return od.Name == d.Name })
		if j < 0 {
			continue
		}
		for k := range d.Taints {
			t := &d.Taints[k]
			if t.TimeAdded != nil {
				continue
			}
			for _, ot := range o.Spec.Devices[j].Taints {
				if ot.Key == t.Key && ot.Value == t.Value && ot.Effect == t.Effect && ot.TimeAdded != nil {
					t.TimeAdded = ot.TimeAdded.DeepCopy()
					break
				}
			}
		}
	}
}

// resourceSliceFields are the field selectors upstream clients use on
// v1 ResourceSlices (kubelet plugins list their node's slices by
// spec.nodeName and spec.driver).
func resourceSliceFields(obj runtime.Object) fields.Set {
	s := obj.(*resourcev1.ResourceSlice)
	node := ""
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return fields.Set{
		resourcev1.ResourceSliceSelectorNodeName: node,
		resourcev1.ResourceSliceSelectorDriver:   s.Spec.Driver,
		resourcev1.ResourceSliceSelectorPoolName: s.Spec.Pool.Name,
	}
}

// gvrOf is a shorthand for registry lookups of built-in kinds.
func gvrOf(gv schema.GroupVersion, resource string) schema.GroupVersionResource {
	return gv.WithResource(resource)
}

// lightPod is what the watch cache needs of a stored pod.
type lightPod struct {
	Metadata struct {
		Name          string            `json:"name"`
		Namespace     string            `json:"namespace"`
		Labels        map[string]string `json:"labels"`
		ManagedFields mfOffsets         `json:"managedFields"`
	} `json:"metadata"`
	Spec struct {
		NodeName      string `json:"nodeName"`
		SchedulerName string `json:"schedulerName"`
		RestartPolicy string `json:"restartPolicy"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// lightPodDecode yields the same labels and fields as podFields without
// building a whole Pod; pods are the most written kind. encoding/json v2
// skips what lightPod does not name (managedFields, most of the spec and
// status) in one pass; v1 scanned it twice.
func lightPodDecode(stored []byte) (storage.Decoded, error) {
	var p lightPod
	if err := jsonv2.Unmarshal(stored, &p); err != nil {
		return storage.Decoded{}, fmt.Errorf("decode stored pod: %w", err)
	}
	return storage.Decoded{Labels: p.Metadata.Labels, Fields: map[string]string{
		"metadata.name": p.Metadata.Name, "metadata.namespace": p.Metadata.Namespace,
		"spec.nodeName": p.Spec.NodeName, "spec.schedulerName": p.Spec.SchedulerName,
		"status.phase": p.Status.Phase, "spec.restartPolicy": p.Spec.RestartPolicy,
	}, Omit: memberSpan(stored, p.Metadata.ManagedFields.v0, p.Metadata.ManagedFields.v1)}, nil
}
