package apiserver

import (
	"fmt"
	"sort"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

var namespaceColumns = []column{nameCol, {name: "Status", typ: "string"}, ageCol}

func namespaceRow(obj runtime.Object) []any {
	ns := obj.(*corev1.Namespace)
	return []any{ns.Name, string(ns.Status.Phase), age(ns)}
}

var nodeColumns = []column{nameCol, {name: "Status", typ: "string"}, ageCol, {name: "Version", typ: "string"},
	{name: "Internal-IP", typ: "string", priority: 1}}

func nodeRow(obj runtime.Object) []any {
	n := obj.(*corev1.Node)
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = "NotReady" // False or Unknown, as kubectl shows them
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	ip := "<none>"
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	return []any{n.Name, status, age(n), n.Status.NodeInfo.KubeletVersion, ip}
}

var podColumns = []column{nameCol, {name: "Ready", typ: "string"}, {name: "Status", typ: "string"},
	{name: "Restarts", typ: "string"}, ageCol, {name: "Node", typ: "string", priority: 1}}

func podRow(obj runtime.Object) []any {
	p := obj.(*corev1.Pod)
	ready, restarts := 0, int32(0)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		restarts += cs.RestartCount
	}
	node := p.Spec.NodeName
	if node == "" {
		node = "<none>"
	}
	return []any{p.Name, fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)), podStatusText(p),
		fmt.Sprint(restarts), age(p), node}
}

// podStatusText is the STATUS column: a waiting or terminated reason of a
// container, Terminating, or the phase.
func podStatusText(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "" && p.Status.Phase == corev1.PodRunning:
			reason = cs.State.Terminated.Reason
		}
	}
	if reason == "" {
		reason = "Pending"
	}
	return reason
}

var eventColumns = []column{{name: "Last Seen", typ: "string"}, {name: "Type", typ: "string"},
	{name: "Reason", typ: "string"}, {name: "Object", typ: "string"}, {name: "Message", typ: "string"},
	{name: "Name", typ: "string", format: "name", priority: 1}}

func eventRow(obj runtime.Object) []any {
	e := obj.(*corev1.Event)
	last := e.LastTimestamp
	if last.IsZero() {
		last = e.FirstTimestamp
	}
	return []any{ageSince(last), e.Type, e.Reason,
		strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name, e.Message, e.Name}
}

var quotaColumns = []column{nameCol, ageCol, {name: "Used", typ: "string"}}

func quotaRow(obj runtime.Object) []any {
	q := obj.(*corev1.ResourceQuota)
	var parts []string
	for name, hard := range q.Spec.Hard {
		used := q.Status.Used[name]
		parts = append(parts, fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String()))
	}
	sort.Strings(parts)
	return []any{q.Name, age(q), strings.Join(parts, ", ")}
}

var classColumns = []column{nameCol, {name: "Driver", typ: "string"}, {name: "Controller", typ: "string"}, ageCol}

func classRow(obj runtime.Object) []any {
	c := obj.(*resourcev1alpha2.ResourceClass)
	ctrl := c.ControllerName
	if ctrl == "" {
		ctrl = "<structured>"
	}
	return []any{c.Name, c.DriverName, ctrl, age(c)}
}

var claimColumns = []column{nameCol, {name: "Class", typ: "string"}, {name: "Allocation", typ: "string"},
	{name: "State", typ: "string"}, ageCol, {name: "Node", typ: "string", priority: 1}}

func claimRow(obj runtime.Object) []any {
	c := obj.(*resourcev1alpha2.ResourceClaim)
	var state []string
	node := "<none>"
	if c.DeletionTimestamp != nil {
		state = append(state, "deleted")
	}
	if c.Status.Allocation == nil {
		state = append(state, "pending")
	} else {
		state = append(state, "allocated")
		for _, h := range c.Status.Allocation.ResourceHandles {
			if h.StructuredData != nil && h.StructuredData.NodeName != "" {
				node = h.StructuredData.NodeName
			}
		}
	}
	if len(c.Status.ReservedFor) > 0 {
		state = append(state, "reserved")
	}
	if c.Status.DeallocationRequested {
		state = append(state, "deallocating")
	}
	return []any{c.Name, c.Spec.ResourceClassName, string(c.Spec.AllocationMode), strings.Join(state, ","), age(c), node}
}

var schedCtxColumns = []column{nameCol, {name: "Selected Node", typ: "string"}, ageCol}

func schedCtxRow(obj runtime.Object) []any {
	c := obj.(*resourcev1alpha2.PodSchedulingContext)
	return []any{c.Name, c.Spec.SelectedNode, age(c)}
}

var sliceColumns = []column{nameCol, {name: "Node", typ: "string"}, {name: "Driver", typ: "string"}, ageCol}

func sliceRow(obj runtime.Object) []any {
	s := obj.(*resourcev1alpha2.NodeResourceSlice)
	return []any{s.Name, s.Spec.NodeName, s.Spec.DriverName, age(s)}
}

// claimV1Columns are kubectl's against Kubernetes (name, state, age),
// with the allocated devices in the wide output.
var claimV1Columns = []column{nameCol, {name: "State", typ: "string"}, ageCol, {name: "Devices", typ: "string", priority: 1}}

func claimV1Row(obj runtime.Object) []any {
	c := obj.(*resourcev1.ResourceClaim)
	var state, devices []string
	if c.DeletionTimestamp != nil {
		state = append(state, "deleted")
	}
	if c.Status.Allocation == nil {
		state = append(state, "pending")
	} else {
		state = append(state, "allocated")
		for _, r := range c.Status.Allocation.Devices.Results {
			devices = append(devices, r.Driver+"/"+r.Pool+"/"+r.Device)
		}
	}
	if len(c.Status.ReservedFor) > 0 {
		state = append(state, "reserved")
	}
	dev := "<none>"
	if len(devices) > 0 {
		dev = strings.Join(devices, ",")
	}
	return []any{c.Name, strings.Join(state, ","), age(c), dev}
}

// resourceSliceColumns are those of kubectl against Kubernetes.
var resourceSliceColumns = []column{nameCol, {name: "Node", typ: "string"}, {name: "Driver", typ: "string"},
	{name: "Pool", typ: "string"}, ageCol}

func resourceSliceRow(obj runtime.Object) []any {
	s := obj.(*resourcev1.ResourceSlice)
	node := "<none>"
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		node = *s.Spec.NodeName
	}
	return []any{s.Name, node, s.Spec.Driver, s.Spec.Pool.Name, age(s)}
}

var paramsColumns = []column{nameCol, {name: "Generated From", typ: "string"}, ageCol}

func claimParamsRow(obj runtime.Object) []any {
	p := obj.(*resourcev1alpha2.ResourceClaimParameters)
	from := "<none>"
	if g := p.GeneratedFrom; g != nil {
		from = g.Kind + "/" + g.Name
	}
	return []any{p.Name, from, age(p)}
}

func classParamsRow(obj runtime.Object) []any {
	p := obj.(*resourcev1alpha2.ResourceClassParameters)
	from := "<none>"
	if g := p.GeneratedFrom; g != nil {
		from = g.Kind + "/" + g.Name
	}
	return []any{p.Name, from, age(p)}
}

var crdColumns = []column{nameCol, {name: "Created At", typ: "date"}}

func crdRow(obj runtime.Object) []any {
	c := obj.(*apiextv1.CustomResourceDefinition)
	return []any{c.Name, c.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
}

var leaseColumns = []column{nameCol, {name: "Holder", typ: "string"}, ageCol}

func leaseRow(obj runtime.Object) []any {
	l := obj.(*coordinationv1.Lease)
	return []any{l.Name, ptr.Deref(l.Spec.HolderIdentity, ""), age(l)}
}
