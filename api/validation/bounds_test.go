package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantities that do not fit allot's int64 amounts are refused wherever
// they enter: pods, nodes, quotas and slices. Kubernetes checks only signs.
func TestQuantitiesAreBounded(t *testing.T) {
	const (
		huge      = "1e400"
		hugeTi    = "99999999999999999999999Ti"
		maxMilli  = "9223372036854775807m"
		overMilli = "9223372036854775.808"
		maxUnits  = "9223372036854775807"
		overUnits = "9223372036854775808"
	)
	pod := func(limits corev1.ResourceList) *corev1.Pod { return makePod("a").resources(limits, nil).obj() }
	node := func(alloc corev1.ResourceList) *corev1.Node {
		return makeNode("w").with(func(n *corev1.Node) { n.Status.Allocatable = alloc }).obj()
	}
	quota := func(hard corev1.ResourceList) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: objMeta("q", "default"), Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	}
	slice := func(q string) *resourcev1alpha2.NodeResourceSlice {
		v := resource.MustParse(q)
		return makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
			p.CommonAttributes[0].Attributes = append(p.CommonAttributes[0].Attributes,
				resourcev1alpha2.Attribute{Name: "memory", AttributeValue: resourcev1alpha2.AttributeValue{Quantity: &v}})
		}).obj()
	}
	const podCPU = "spec.containers[0].resources.limits[cpu]: Invalid value"
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"pod cpu 1e400":          {errs: ValidatePod(pod(rl("cpu=" + huge))), want: []string{podCPU, "millicores"}},
		"pod cpu huge Ti":        {errs: ValidatePod(pod(rl("cpu=" + hugeTi))), want: []string{podCPU}},
		"pod cpu above bound":    {errs: ValidatePod(pod(rl("cpu=" + overMilli))), want: []string{podCPU}},
		"pod cpu at bound":       {errs: ValidatePod(pod(rl("cpu=" + maxMilli)))},
		"pod memory 1e400":       {errs: ValidatePod(pod(rl("memory=" + huge))), want: []string{"spec.containers[0].resources.limits[memory]: Invalid value", "2^63-1"}},
		"pod memory above bound": {errs: ValidatePod(pod(rl("memory=" + overUnits))), want: []string{"limits[memory]"}},
		"pod memory at bound":    {errs: ValidatePod(pod(rl("memory=" + maxUnits)))},
		"pod extended 1e400":     {errs: ValidatePod(pod(rl("example.com/gpu=" + huge))), want: []string{"limits[example.com/gpu]: Invalid value"}},
		"init container":         {errs: ValidatePod(makePod("a").initContainer("i", "img").with(func(p *corev1.Pod) { p.Spec.InitContainers[0].Resources.Requests = rl("cpu=" + huge) }).obj()), want: []string{"spec.initContainers[0].resources.requests[cpu]"}},
		"node cpu 1e400":         {errs: ValidateNode(node(rl("cpu=" + huge))), want: []string{"status.allocatable[cpu]: Invalid value"}},
		"node memory above":      {errs: ValidateNode(node(rl("memory=" + overUnits))), want: []string{"status.allocatable[memory]"}},
		"node extended fraction": {errs: ValidateNode(node(rl("example.com/gpu=1500m"))), want: []string{"status.allocatable[example.com/gpu]: Invalid value", "whole number"}},
		"node at bounds":         {errs: ValidateNode(node(rl("cpu="+maxMilli, "memory="+maxUnits, "example.com/gpu="+maxUnits)))},
		"quota cpu 1e400":        {errs: ValidateResourceQuota(quota(rl("requests.cpu=" + huge))), want: []string{"spec.hard[requests.cpu]: Invalid value", "millicores"}},
		"quota memory huge Ti":   {errs: ValidateResourceQuota(quota(rl("limits.memory=" + huge))), want: []string{"spec.hard[limits.memory]"}},
		"quota at bound":         {errs: ValidateResourceQuota(quota(rl("cpu=" + maxMilli)))},
		"slice quantity 1e400":   {errs: ValidateNodeResourceSlice(slice(huge)), want: []string{"spec.partitionable.commonAttributes[0].attributes[1].quantity: Invalid value"}},
		"slice quantity -1e400":  {errs: ValidateNodeResourceSlice(slice("-" + huge)), want: []string{"attributes[1].quantity"}},
		"slice quantity bound":   {errs: ValidateNodeResourceSlice(slice("-" + maxUnits))},
	} {
		t.Run(name, func(t *testing.T) {
			got := tc.errs
			if len(tc.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("unexpected errors: %v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one error containing %q, got %v", tc.want, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0].Error(), w) {
					t.Fatalf("error %q does not contain %q", got[0], w)
				}
			}
		})
	}
}
