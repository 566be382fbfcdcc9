package validation

import (
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateNamespace(t *testing.T) {
	ns := func(name string, f ...corev1.FinalizerName) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: objMeta(name, ""), Spec: corev1.NamespaceSpec{Finalizers: f}}
	}
	active := ns("a")
	DefaultNamespace(active)
	terminating := ns("a")
	terminating.Status.Phase = "Gone"
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"label name":       {errs: ValidateNamespace(ns("user-namespace", corev1.FinalizerKubernetes))},
		"dots not allowed": {errs: ValidateNamespace(ns("a.b")), want: []string{"metadata.name: must not contain dots"}},
		"bad finalizer":    {errs: ValidateNamespace(ns("a", "a/b/c")), want: []string{"spec.finalizers[0]"}},
		"update rename":    {errs: ValidateNamespaceUpdate(ns("b"), ns("a")), want: []string{"metadata.name: field is immutable"}},
		"status active":    {errs: ValidateNamespaceStatusUpdate(active, ns("a"))},
		"status bad phase": {errs: ValidateNamespaceStatusUpdate(terminating, ns("a")), want: []string{"status.phase"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
	if active.Status.Phase != corev1.NamespaceActive {
		t.Errorf("default phase = %q, want Active", active.Status.Phase)
	}
}

func TestValidateNode(t *testing.T) {
	for name, tc := range map[string]struct {
		node *corev1.Node
		want []string
	}{
		"valid":                {node: makeNode("worker-1").taint("gpu", "true", corev1.TaintEffectNoSchedule).obj()},
		"same key two effects": {node: makeNode("w").taint("gpu", "", corev1.TaintEffectNoSchedule).taint("gpu", "", corev1.TaintEffectNoExecute).obj()},
		"duplicate taint":      {node: makeNode("w").taint("gpu", "a", corev1.TaintEffectNoSchedule).taint("gpu", "b", corev1.TaintEffectNoSchedule).obj(), want: []string{"spec.taints[1]: Duplicate"}},
		"taint key invalid":    {node: makeNode("w").taint("a b", "", corev1.TaintEffectNoSchedule).obj(), want: []string{"spec.taints[0].key"}},
		"taint key empty":      {node: makeNode("w").taint("", "", corev1.TaintEffectNoSchedule).obj(), want: []string{"spec.taints[0].key: Required"}},
		"taint effect empty":   {node: makeNode("w").taint("gpu", "", "").obj(), want: []string{"spec.taints[0].effect: Required"}},
		"taint effect bad":     {node: makeNode("w").taint("gpu", "", "Evict").obj(), want: []string{"spec.taints[0].effect: Unsupported"}},
		"taint value bad":      {node: makeNode("w").taint("gpu", "a b", corev1.TaintEffectNoSchedule).obj(), want: []string{"spec.taints[0].value"}},
		"negative capacity":    {node: makeNode("w").with(func(n *corev1.Node) { n.Status.Capacity = rl("cpu=-1") }).obj(), want: []string{"status.capacity[cpu]"}},
		"negative allocatable": {node: makeNode("w").with(func(n *corev1.Node) { n.Status.Allocatable = rl("example.com/gpu=-2") }).obj(), want: []string{"status.allocatable[example.com/gpu]"}},
		"bad resource name":    {node: makeNode("w").with(func(n *corev1.Node) { n.Status.Capacity = rl("a b=1") }).obj(), want: []string{"status.capacity[a b]"}},
		"condition bad status": {node: makeNode("w").with(func(n *corev1.Node) { n.Status.Conditions[0].Status = "Maybe" }).obj(), want: []string{"status.conditions[0].status"}},
		"condition no type":    {node: makeNode("w").with(func(n *corev1.Node) { n.Status.Conditions[0].Type = "" }).obj(), want: []string{"status.conditions[0].type"}},
		"condition twice": {
			node: makeNode("w").with(func(n *corev1.Node) { n.Status.Conditions = append(n.Status.Conditions, n.Status.Conditions[0]) }).obj(),
			want: []string{"status.conditions[1].type: Duplicate"},
		},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateNode(tc.node), tc.want...) })
	}
}

func TestValidateNodeUpdates(t *testing.T) {
	old := makeNode("w").obj()
	tainted := makeNode("w").taint("gpu", "", "Bad").obj()
	unready := makeNode("w").with(func(n *corev1.Node) { n.Status.Conditions[0].Status = "" }).obj()
	expectErrs(t, ValidateNodeUpdate(tainted, old), "spec.taints[0].effect")
	expectErrs(t, ValidateNodeStatusUpdate(unready, old), "status.conditions[0].status")
	expectErrs(t, ValidateNodeStatusUpdate(makeNode("w").obj(), old))
}

func TestValidateEvent(t *testing.T) {
	event := func(f func(*corev1.Event)) *corev1.Event {
		ev := &corev1.Event{
			ObjectMeta:     objMeta("web.17a", "default"),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Type:           corev1.EventTypeNormal, Reason: "Scheduled", Message: "assigned",
		}
		f(ev)
		return ev
	}
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"valid":               {errs: ValidateEvent(event(func(*corev1.Event) {}))},
		"no type":             {errs: ValidateEvent(event(func(e *corev1.Event) { e.Type = "" }))},
		"bad type":            {errs: ValidateEvent(event(func(e *corev1.Event) { e.Type = "Error" })), want: []string{`type: supported values: "Normal", "Warning"`}},
		"no kind":             {errs: ValidateEvent(event(func(e *corev1.Event) { e.InvolvedObject.Kind = "" })), want: []string{"involvedObject.kind: Required"}},
		"no name":             {errs: ValidateEvent(event(func(e *corev1.Event) { e.InvolvedObject.Name = "" })), want: []string{"involvedObject.name: Required"}},
		"long reason":         {errs: ValidateEvent(event(func(e *corev1.Event) { e.Reason = strings.Repeat("r", 1025) })), want: []string{"reason: Too long"}},
		"long message":        {errs: ValidateEvent(event(func(e *corev1.Event) { e.Message = strings.Repeat("m", 4097) })), want: []string{"message: Too long"}},
		"message at limit":    {errs: ValidateEvent(event(func(e *corev1.Event) { e.Message = strings.Repeat("m", 4096) }))},
		"update count":        {errs: ValidateEventUpdate(event(func(e *corev1.Event) { e.Count = 2 }), event(func(*corev1.Event) {}))},
		"update other object": {errs: ValidateEventUpdate(event(func(e *corev1.Event) { e.InvolvedObject.Name = "x" }), event(func(*corev1.Event) {})), want: []string{"involvedObject: field is immutable"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}

func TestValidateResourceQuota(t *testing.T) {
	quota := func(hard corev1.ResourceList) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: objMeta("q", "default"), Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	}
	for name, tc := range map[string]struct {
		hard corev1.ResourceList
		want []string
	}{
		"pods":                {hard: rl("pods=10", "requests.cpu=4", "limits.memory=8Gi")},
		"claims total":        {hard: rl("count/resourceclaims.resource.k8s.io=4")},
		"claims per class":    {hard: rl("gpu.resourceclass.resource.k8s.io/resourceclaims=2")},
		"count of core kind":  {hard: rl("count/pods=5")},
		"extended resource":   {hard: rl("requests.example.com/gpu=2")},
		"negative":            {hard: rl("pods=-1"), want: []string{"spec.hard[pods]: must be greater than or equal to 0"}},
		"unknown plain name":  {hard: rl("gpus=1"), want: []string{"spec.hard[gpus]: must be a standard quota resource"}},
		"bad qualified name":  {hard: rl("a/b/c=1"), want: []string{"spec.hard[a/b/c]"}},
		"count without kind":  {hard: rl("count/=1"), want: []string{"spec.hard[count/]: must be non-empty", "spec.hard[count/]: name part must consist"}},
		"bad class name part": {hard: rl("GPU_.resourceclass.resource.k8s.io/resourceclaims=1"), want: []string{"spec.hard[GPU_.resourceclass.resource.k8s.io/resourceclaims]"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceQuota(quota(tc.hard)), tc.want...) })
	}
	used := quota(rl("pods=1"))
	used.Status.Used = rl("pods=-1")
	expectErrs(t, ValidateResourceQuotaStatusUpdate(used, quota(rl("pods=1"))), "status.used[pods]")
	expectErrs(t, ValidateResourceQuotaUpdate(quota(rl("cpu=-1")), quota(nil)), "spec.hard[cpu]")
}

func TestValidateBinding(t *testing.T) {
	binding := func(f func(*corev1.Binding)) *corev1.Binding {
		b := &corev1.Binding{
			ObjectMeta: objMeta("web", "default"),
			Target:     corev1.ObjectReference{Kind: "Node", Name: "worker-1"},
			ResourceClaims: []corev1.BindingResourceClaim{{
				Name: "web-gpu", DriverName: "cards.example.com",
				Allocation: &runtime.RawExtension{Raw: []byte(`{"resourceHandles":[{"driverName":"cards.example.com","structuredData":{"nodeName":"worker-1","partitionable":{"instances":[{"id":"gpu-0"}]}}}]}`)},
			}},
			AllocationFences: []corev1.AllocationFence{{NodeName: "worker-1", DriverName: "cards.example.com", Revision: "12"}},
		}
		f(b)
		return b
	}
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"valid":            {errs: ValidateBinding(binding(func(*corev1.Binding) {}))},
		"no target":        {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.Target.Name = "" })), want: []string{"target.name: Required"}},
		"target not node":  {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.Target.Kind = "Pod" })), want: []string{"target.kind"}},
		"reserve only":     {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.ResourceClaims[0].Allocation, b.ResourceClaims[0].DriverName = nil, "" }))},
		"no driver":        {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.ResourceClaims[0].DriverName = "" })), want: []string{"resourceClaims[0].driverName: Required"}},
		"claim twice":      {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.ResourceClaims = append(b.ResourceClaims, b.ResourceClaims[0]) })), want: []string{"resourceClaims[1].name: Duplicate"}},
		"alloc not strict": {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.ResourceClaims[0].Allocation = raw(`{"handles":[]}`) })), want: []string{`resourceClaims[0].allocation: unknown field "handles"`}},
		"alloc invalid": {
			errs: ValidateBinding(binding(func(b *corev1.Binding) {
				b.ResourceClaims[0].Allocation = raw(`{"resourceHandles":[{"data":"x","structuredData":{"partitionable":{"instances":[]}}}]}`)
			})),
			want: []string{"resourceClaims[0].allocation.resourceHandles[0]: may specify only one of: `data`, `structuredData`"},
		},
		"fence incomplete": {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.AllocationFences[0].Revision = "" })), want: []string{"allocationFences[0].revision: Required"}},
		"fence twice":      {errs: ValidateBinding(binding(func(b *corev1.Binding) { b.AllocationFences = append(b.AllocationFences, b.AllocationFences[0]) })), want: []string{"allocationFences[1]: Duplicate"}},
		"update target":    {errs: ValidateBindingUpdate(binding(func(b *corev1.Binding) { b.Target.Name = "worker-2" }), binding(func(*corev1.Binding) {})), want: []string{"target: field is immutable"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}
