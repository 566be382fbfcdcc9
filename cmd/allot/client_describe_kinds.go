package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("convert %s: %w", u.GetKind(), err)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func describePod(w *describeWriter, u *unstructured.Unstructured) error {
	var pod corev1.Pod
	if err := fromUnstructured(u, &pod); err != nil {
		return err
	}
	st := pod.Status
	w.line(0, "Node:\t%s", orNone(pod.Spec.NodeName))
	if st.StartTime != nil {
		w.line(0, "Start Time:\t%s", st.StartTime.UTC().Format(time.RFC3339))
	}
	if summary, blocker, ok := terminating(&pod, time.Now()); ok {
		w.line(0, "Status:\t%s (%s)", summary, orNone(string(st.Phase)))
		if blocker != "" {
			w.line(0, "Deletion Waits:\t%s", blocker)
		}
	} else {
		w.line(0, "Status:\t%s", orNone(string(st.Phase)))
	}
	if st.Reason != "" {
		w.line(0, "Reason:\t%s", st.Reason)
	}
	if st.Message != "" {
		w.line(0, "Message:\t%s", st.Message)
	}
	if st.NominatedNodeName != "" {
		w.line(0, "Nominated Node:\t%s", st.NominatedNodeName)
	}
	describeContainers(w, "Init Containers", pod.Spec.InitContainers, st.InitContainerStatuses)
	describeContainers(w, "Containers", pod.Spec.Containers, st.ContainerStatuses)
	describePodClaims(w, &pod)
	describeConditions(w, podConditionRows(st.Conditions), "Type\tStatus\tReason\tMessage")
	describeMap(w, "Node-Selectors", pod.Spec.NodeSelector, "=")
	var tols []string
	for _, t := range pod.Spec.Tolerations {
		tols = append(tols, fmt.Sprintf("%s %s %s:%s", t.Key, t.Operator, t.Value, t.Effect))
	}
	w.line(0, "Tolerations:\t%s", orNone(strings.Join(tols, ", ")))
	return nil
}

func describeContainers(w *describeWriter, title string, cs []corev1.Container, statuses []corev1.ContainerStatus) {
	if len(cs) == 0 {
		return
	}
	byName := map[string]corev1.ContainerStatus{}
	for _, s := range statuses {
		byName[s.Name] = s
	}
	w.line(0, "%s:", title)
	for _, c := range cs {
		w.line(1, "%s:", c.Name)
		w.line(2, "Image:\t%s", orNone(c.Image))
		if len(c.Command) > 0 {
			w.line(2, "Command:\t%s", strings.Join(c.Command, " "))
		}
		if len(c.Args) > 0 {
			w.line(2, "Args:\t%s", strings.Join(c.Args, " "))
		}
		s, ok := byName[c.Name]
		if ok {
			w.line(2, "State:\t%s", containerState(s.State))
			if s.LastTerminationState.Terminated != nil {
				w.line(2, "Last State:\t%s", containerState(s.LastTerminationState))
			}
			w.line(2, "Ready:\t%t", s.Ready)
			w.line(2, "Restart Count:\t%d", s.RestartCount)
		}
		describeResourceList(w, 2, "Limits", c.Resources.Limits)
		describeResourceList(w, 2, "Requests", c.Resources.Requests)
		if len(c.Resources.Claims) > 0 {
			var names []string
			for _, cl := range c.Resources.Claims {
				names = append(names, cl.Name)
			}
			w.line(2, "Claims:\t%s", strings.Join(names, ", "))
		}
		for _, h := range s.AllocatedResourcesStatus {
			for _, r := range h.Resources {
				w.line(2, "Device %s:\t%s %s", h.Name, r.ResourceID, r.Health)
			}
		}
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "Running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Terminated != nil:
		t := s.Terminated
		return fmt.Sprintf("Terminated (%s, exit code %d)", orNone(t.Reason), t.ExitCode)
	case s.Waiting != nil:
		msg := "Waiting (" + orNone(s.Waiting.Reason) + ")"
		if s.Waiting.Message != "" {
			msg += ": " + s.Waiting.Message
		}
		return msg
	}
	return "Waiting"
}

func describeResourceList(w *describeWriter, level int, title string, rl corev1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	w.line(level, "%s:", title)
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		q := rl[corev1.ResourceName(n)]
		w.line(level+1, "%s:\t%s", n, q.String())
	}
}

// describePodClaims lists the pod's claims with the claim each one
// resolved to (a template's generated claim comes from the status).
func describePodClaims(w *describeWriter, pod *corev1.Pod) {
	if !pod.UsesResourceClaims() {
		return
	}
	generated := map[string]string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			generated[s.Name] = *s.ResourceClaimName
		}
	}
	w.line(0, "Resource Claims:")
	for _, rc := range pod.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimName != nil:
			w.line(1, "%s:\tclaim %s", rc.Name, *rc.ResourceClaimName)
		case rc.ResourceClaimTemplateName != nil:
			w.line(1, "%s:\ttemplate %s, claim %s", rc.Name, *rc.ResourceClaimTemplateName, orNone(generated[rc.Name]))
		default:
			w.line(1, "%s:\t<none>", rc.Name)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		for _, m := range st.RequestMappings {
			w.line(1, "%s (container %s):\tclaim %s, request %s", m.ResourceName, m.ContainerName, st.ResourceClaimName, m.RequestName)
		}
	}
}

func podConditionRows(cs []corev1.PodCondition) []string {
	var rows []string
	for _, c := range cs {
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s", c.Type, c.Status, c.Reason, c.Message))
	}
	return rows
}

// describeConditions prints a Conditions table.
func describeConditions(w *describeWriter, rows []string, header string) {
	if len(rows) == 0 {
		w.line(0, "Conditions:\t<none>")
		return
	}
	w.line(0, "Conditions:")
	w.line(1, "%s", header)
	w.line(1, "%s", dashes(header))
	for _, r := range rows {
		w.line(1, "%s", r)
	}
}

// dashes underlines each tab-separated heading.
func dashes(header string) string {
	parts := strings.Split(header, "\t")
	for i, p := range parts {
		parts[i] = strings.Repeat("-", len(p))
	}
	return strings.Join(parts, "\t")
}

func describeNode(w *describeWriter, u *unstructured.Unstructured) error {
	var node corev1.Node
	if err := fromUnstructured(u, &node); err != nil {
		return err
	}
	w.line(0, "Unschedulable:\t%t", node.Spec.Unschedulable)
	var taints []string
	for _, t := range node.Spec.Taints {
		taints = append(taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	w.line(0, "Taints:\t%s", orNone(strings.Join(taints, ", ")))
	var rows []string
	for _, c := range node.Status.Conditions {
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s", c.Type, c.Status,
			since(c.LastHeartbeatTime), c.Reason, c.Message))
	}
	describeConditions(w, rows, "Type\tStatus\tLast Heartbeat\tReason\tMessage")
	if len(node.Status.Addresses) > 0 {
		w.line(0, "Addresses:")
		for _, a := range node.Status.Addresses {
			w.line(1, "%s:\t%s", a.Type, a.Address)
		}
	}
	describeResourceList(w, 0, "Capacity", node.Status.Capacity)
	describeResourceList(w, 0, "Allocatable", node.Status.Allocatable)
	info := node.Status.NodeInfo
	if info != (corev1.NodeSystemInfo{}) {
		w.line(0, "System Info:")
		w.line(1, "Kernel Version:\t%s", orNone(info.KernelVersion))
		w.line(1, "OS Image:\t%s", orNone(info.OSImage))
		w.line(1, "Architecture:\t%s", orNone(info.Architecture))
		w.line(1, "Container Runtime:\t%s", orNone(info.ContainerRuntimeVersion))
		w.line(1, "Agent Version:\t%s", orNone(info.KubeletVersion))
	}
	return nil
}

func describeClaim(w *describeWriter, u *unstructured.Unstructured) error {
	var claim resourcev1alpha2.ResourceClaim
	if err := fromUnstructured(u, &claim); err != nil {
		return err
	}
	spec, st := claim.Spec, claim.Status
	w.line(0, "Resource Class:\t%s", spec.ResourceClassName)
	mode := spec.AllocationMode
	if mode == "" {
		mode = resourcev1alpha2.AllocationModeWaitForFirstConsumer
	}
	w.line(0, "Allocation Mode:\t%s", mode)
	if p := spec.ParametersRef; p != nil {
		w.line(0, "Parameters:\t%s %s", qualify(p.Kind, p.APIGroup), p.Name)
	}
	w.line(0, "Driver:\t%s", orNone(st.DriverName))
	if st.ControllerName != "" {
		w.line(0, "Controller:\t%s", st.ControllerName)
	}
	describeAllocation(w, st.Allocation)
	if len(st.ReservedFor) == 0 {
		w.line(0, "Reserved For:\t<none>")
	} else {
		w.line(0, "Reserved For:")
		w.line(1, "Resource\tName\tUID")
		w.line(1, "--------\t----\t---")
		for _, r := range st.ReservedFor {
			w.line(1, "%s\t%s\t%s", qualify(r.Resource, r.APIGroup), r.Name, r.UID)
		}
	}
	if st.DeallocationRequested {
		w.line(0, "Deallocation Requested:\ttrue")
	}
	return nil
}

func describeAllocation(w *describeWriter, a *resourcev1alpha2.AllocationResult) {
	if a == nil {
		w.line(0, "Allocation:\t<none>")
		return
	}
	w.line(0, "Allocation:")
	w.line(1, "Shareable:\t%t", a.Shareable)
	if a.AvailableOnNodes != nil {
		var terms []string
		for _, t := range a.AvailableOnNodes.NodeSelectorTerms {
			var reqs []string
			for _, r := range t.MatchExpressions {
				reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
			}
			for _, r := range t.MatchFields {
				reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
			}
			terms = append(terms, strings.Join(reqs, " and "))
		}
		w.line(1, "Available On Nodes:\t%s", orNone(strings.Join(terms, "; or ")))
	}
	for i, h := range a.ResourceHandles {
		w.line(1, "Resource Handle %d:", i)
		w.line(2, "Driver:\t%s", orNone(h.DriverName))
		if h.Data != "" {
			w.line(2, "Data:\t%s", h.Data)
		}
		if sd := h.StructuredData; sd != nil {
			w.line(2, "Node:\t%s", orNone(sd.NodeName))
			if sd.Partitionable != nil {
				var ids []string
				for _, in := range sd.Partitionable.Instances {
					ids = append(ids, in.ID)
				}
				w.line(2, "Instances:\t%s", orNone(strings.Join(ids, ", ")))
			}
		}
	}
}

func qualify(kind, group string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}
