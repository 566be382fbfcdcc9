package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
)

// TestFenceAnnotations: a Node's fence time is a positive duration, a
// pod's opt-in a boolean; a value already stored is kept on update.
func TestFenceAnnotations(t *testing.T) {
	node := func(v string) *corev1.Node {
		return makeNode("w").with(func(n *corev1.Node) { n.Annotations = map[string]string{corev1.AnnotationSelfFenceAfter: v} }).obj()
	}
	pod := func(v string) *corev1.Pod {
		return makePod("p").with(func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.AnnotationFence: v} }).obj()
	}
	const nodeField, podField = "metadata.annotations[allot.dev/self-fence-after]", "metadata.annotations[allot.dev/fence]"
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"node 20s":              {errs: ValidateNode(node("20s"))},
		"node 500ms":            {errs: ValidateNode(node("500ms"))},
		"node zero":             {errs: ValidateNode(node("0s")), want: []string{nodeField + ": Invalid value"}},
		"node negative":         {errs: ValidateNode(node("-1s")), want: []string{nodeField}},
		"node not a duration":   {errs: ValidateNode(node("20")), want: []string{nodeField + ": Invalid value: \"20\": must be a positive duration"}},
		"node update to bad":    {errs: ValidateNodeUpdate(node("x"), node("20s")), want: []string{nodeField}},
		"node bad kept":         {errs: ValidateNodeUpdate(node("x"), node("x"))},
		"node without":          {errs: ValidateNode(makeNode("w").obj())},
		"pod true":              {errs: ValidatePod(pod("true"))},
		"pod false":             {errs: ValidatePod(pod("false"))},
		"pod not a boolean":     {errs: ValidatePod(pod("yes")), want: []string{podField + `: Invalid value: "yes": must be "true" or "false"`}},
		"pod update to bad":     {errs: ValidatePodUpdate(pod("maybe"), pod("true")), want: []string{podField}},
		"pod update kept value": {errs: ValidatePodUpdate(pod("yes"), pod("yes"))},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}
