package framework_test

import (
	"context"

	corev1 "allot.dev/allot/api/core/v1"
	fw "allot.dev/allot/internal/scheduler/framework"
)

// fakePlugin is a plugin with function fields, one per extension point;
// nil fields are not implemented... so we build distinct types below and
// share the behaviour through these funcs.
type filterFunc func(pod *corev1.Pod, ni *fw.NodeInfo) *fw.Status

// filterPlugin rejects by a function.
type filterPlugin struct {
	name string
	fn   filterFunc
}

func (p *filterPlugin) Name() string { return p.name }
func (p *filterPlugin) Filter(_ context.Context, _ *fw.CycleState, pod *corev1.Pod, ni *fw.NodeInfo) *fw.Status {
	return p.fn(pod, ni)
}

// rejectNodes rejects the named nodes with code and reason.
func rejectNodes(name string, code fw.Code, reason string, nodes ...string) *filterPlugin {
	set := map[string]bool{}
	for _, n := range nodes {
		set[n] = true
	}
	return &filterPlugin{name: name, fn: func(_ *corev1.Pod, ni *fw.NodeInfo) *fw.Status {
		if set[ni.Name()] {
			return fw.NewStatus(code, reason)
		}
		return nil
	}}
}

// preFilterPlugin returns a fixed status.
type preFilterPlugin struct {
	name string
	st   *fw.Status
}

func (p *preFilterPlugin) Name() string { return p.name }
func (p *preFilterPlugin) PreFilter(context.Context, *fw.CycleState, *corev1.Pod, *fw.Snapshot) *fw.Status {
	return p.st
}

// skipFilter skips its own filter at PreFilter; its Filter would reject all.
type skipFilter struct{}

func (skipFilter) Name() string { return "Skipper" }
func (skipFilter) PreFilter(context.Context, *fw.CycleState, *corev1.Pod, *fw.Snapshot) *fw.Status {
	return fw.NewStatus(fw.Skip)
}
func (skipFilter) Filter(context.Context, *fw.CycleState, *corev1.Pod, *fw.NodeInfo) *fw.Status {
	return fw.NewStatus(fw.Unschedulable, "should have been skipped")
}

// scorePlugin scores by a table of node -> score.
type scorePlugin struct {
	name   string
	scores map[string]int64
	norm   bool
}

func (p *scorePlugin) Name() string { return p.name }
func (p *scorePlugin) Score(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, ni *fw.NodeInfo) (int64, *fw.Status) {
	return p.scores[ni.Name()], nil
}

type normalizedScore struct{ *scorePlugin }

func (normalizedScore) NormalizeScore(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, s []fw.NodeScore) *fw.Status {
	fw.NormalizeMax(s)
	return nil
}

// recorder records Reserve/Unreserve/ContributeBinding calls.
type recorder struct {
	name    string
	calls   *[]string
	reserve *fw.Status
	bind    *fw.Status
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) Reserve(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, node string) *fw.Status {
	*r.calls = append(*r.calls, r.name+".Reserve("+node+")")
	return r.reserve
}
func (r *recorder) Unreserve(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, node string) {
	*r.calls = append(*r.calls, r.name+".Unreserve("+node+")")
}
func (r *recorder) ContributeBinding(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, node string, b *corev1.Binding) *fw.Status {
	*r.calls = append(*r.calls, r.name+".ContributeBinding("+node+")")
	b.ResourceClaims = append(b.ResourceClaims, corev1.BindingResourceClaim{Name: r.name})
	return r.bind
}

// postFilter succeeds or not.
type postFilter struct{ st *fw.Status }

func (postFilter) Name() string { return "Post" }
func (p postFilter) PostFilter(context.Context, *fw.CycleState, *corev1.Pod, *fw.Diagnosis) *fw.Status {
	return p.st
}
