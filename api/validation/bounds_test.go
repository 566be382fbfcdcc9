package validation

import (
	"fmt"
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

// Every list the seeds leave unbounded has a limit, and a list over it
// gives an error naming the list, without checking its items.
func TestListsAreBounded(t *testing.T) {
	n := func(count int, f func(i int)) {
		for i := range count {
			f(i)
		}
	}
	attrs := func(count int) (out []resourcev1alpha2.Attribute) {
		n(count, func(i int) { out = append(out, strAttr(fmt.Sprintf("a%d", i), "x")) })
		return out
	}
	for name, tc := range map[string]struct {
		errs func(over bool) field.ErrorList
		want string
	}{
		"claim parameters requests": {
			errs: func(over bool) field.ErrorList {
				return ValidateResourceClaimParameters(makeClaimParameters(func(p *resourcev1alpha2.ResourceClaimParameters) {
					r := p.Requests[0]
					p.Requests = nil
					n(limitOr(over, resourcev1alpha2.ClaimParametersRequestsMaxSize), func(int) { p.Requests = append(p.Requests, r) })
				}))
			},
			want: "requests: Too many: 33: must have at most 32 items",
		},
		"required instances": {
			errs: func(over bool) field.ErrorList {
				return ValidateResourceClaimParameters(makeClaimParameters(func(p *resourcev1alpha2.ResourceClaimParameters) {
					req := &p.Requests[0].Partitionable.Required
					*req = nil
					n(limitOr(over, resourcev1alpha2.RequiredMaxSize), func(int) {
						*req = append(*req, resourcev1alpha2.PartitionableResourceRequest{Selector: "true"})
					})
				}))
			},
			want: "requests[0].partitionable.required: Too many: 33",
		},
		"class parameters filters": {
			errs: func(over bool) field.ErrorList {
				p := &resourcev1alpha2.ResourceClassParameters{ObjectMeta: objMeta("cp", "")}
				n(limitOr(over, resourcev1alpha2.ClassParametersFiltersMaxSize), func(int) {
					p.Filters = append(p.Filters, resourcev1alpha2.ResourceFilter{DriverName: "cards.example.com",
						ResourceFilterModel: resourcev1alpha2.ResourceFilterModel{Partitionable: &resourcev1alpha2.PartitionableResourceFilter{Selector: "true"}}})
				})
				return ValidateResourceClassParameters(p)
			},
			want: "filters: Too many: 33",
		},
		"instance attributes": {
			errs: func(over bool) field.ErrorList {
				return ValidateNodeResourceSlice(makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
					p.ResourceInstances[0].Attributes = attrs(limitOr(over, resourcev1alpha2.AttributesMaxSize))
				}).obj())
			},
			want: "spec.partitionable.resourceInstances[0].attributes: Too many: 65",
		},
		"common attribute groups": {
			errs: func(over bool) field.ErrorList {
				return ValidateNodeResourceSlice(makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
					n(limitOr(over, resourcev1alpha2.CommonAttributesMaxSize)-1, func(i int) {
						p.CommonAttributes = append(p.CommonAttributes, resourcev1alpha2.AttributeGroup{Name: fmt.Sprintf("g%d", i)})
					})
				}).obj())
			},
			want: "spec.partitionable.commonAttributes: Too many: 129",
		},
		"common attribute references": {
			errs: func(over bool) field.ErrorList {
				return ValidateNodeResourceSlice(makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
					n(limitOr(over, resourcev1alpha2.CommonAttributesRefsMaxSize)-1, func(i int) {
						g := fmt.Sprintf("g%d", i)
						p.CommonAttributes = append(p.CommonAttributes, resourcev1alpha2.AttributeGroup{Name: g})
						p.ResourceInstances[0].CommonAttributesRefs = append(p.ResourceInstances[0].CommonAttributesRefs, g)
					})
				}).obj())
			},
			want: "spec.partitionable.resourceInstances[0].commonAttributesRefs: Too many: 33",
		},
		"partition groups": {
			errs: func(over bool) field.ErrorList {
				return ValidateNodeResourceSlice(makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
					n(limitOr(over, resourcev1alpha2.PartitionsMaxSize), func(i int) {
						p.ResourceInstances[0].Partitions = append(p.ResourceInstances[0].Partitions, group(fmt.Sprintf("p%d", i)))
					})
				}).obj())
			},
			want: "spec.partitionable.resourceInstances[0].partitions: Too many: 129",
		},
		"string slice attribute": {
			errs: func(over bool) field.ErrorList {
				return ValidateNodeResourceSlice(makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
					v := make([]string, limitOr(over, resourcev1alpha2.AttributeSliceMaxSize))
					p.ResourceInstances[0].Attributes = []resourcev1alpha2.Attribute{{Name: "models", AttributeValue: resourcev1alpha2.AttributeValue{StringSlice: &v}}}
				}).obj())
			},
			want: "spec.partitionable.resourceInstances[0].attributes[0].stringSlice: Too many: 65",
		},
		"int slice attribute": {
			errs: func(over bool) field.ErrorList {
				return ValidateNodeResourceSlice(makeSlice("s").with(func(p *resourcev1alpha2.PartitionableResources) {
					v := make([]int64, limitOr(over, resourcev1alpha2.AttributeSliceMaxSize))
					p.ResourceInstances[0].Attributes = []resourcev1alpha2.Attribute{{Name: "ids", AttributeValue: resourcev1alpha2.AttributeValue{IntSlice: &v}}}
				}).obj())
			},
			want: "spec.partitionable.resourceInstances[0].attributes[0].intSlice: Too many: 65",
		},
		"allocated instances": {
			errs: func(over bool) field.ErrorList {
				c := makeClaim("c").allocated().obj()
				in := &c.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances
				*in = nil
				n(limitOr(over, resourcev1alpha2.AllocationResultInstancesMaxSize), func(i int) {
					*in = append(*in, resourcev1alpha2.AllocatedResourceInstance{ID: fmt.Sprintf("gpu-%d", i)})
				})
				return ValidateResourceClaimStatusUpdate(c, makeClaim("c").obj())
			},
			want: "status.allocation.resourceHandles[0].structuredData.partitionable.instances: Too many: 1025",
		},
		"scheduling context claims": {
			errs: func(over bool) field.ErrorList {
				sc := &resourcev1alpha2.PodSchedulingContext{ObjectMeta: objMeta("p", "default")}
				n(limitOr(over, resourcev1alpha2.PodSchedulingClaimsMaxSize), func(i int) {
					sc.Status.ResourceClaims = append(sc.Status.ResourceClaims, resourcev1alpha2.ResourceClaimSchedulingStatus{Name: fmt.Sprintf("c%d", i)})
				})
				return ValidatePodSchedulingContext(sc)
			},
			want: "status.resourceClaims: Too many: 33",
		},
		"pod claims": {
			errs: func(over bool) field.ErrorList {
				b := makePod("a")
				n(limitOr(over, corev1.PodResourceClaimsMaxSize), func(i int) { b.claim(fmt.Sprintf("c%d", i)) })
				return ValidatePod(b.obj())
			},
			want: "spec.resourceClaims: Too many: 33",
		},
		"binding claims": {
			errs: func(over bool) field.ErrorList {
				b := &corev1.Binding{ObjectMeta: objMeta("a", "default"), Target: corev1.ObjectReference{Kind: "Node", Name: "worker-1"}}
				n(limitOr(over, corev1.PodResourceClaimsMaxSize), func(i int) {
					b.ResourceClaims = append(b.ResourceClaims, corev1.BindingResourceClaim{Name: fmt.Sprintf("c%d", i)})
				})
				return ValidateBinding(b)
			},
			want: "resourceClaims: Too many: 33",
		},
	} {
		t.Run(name, func(t *testing.T) {
			for _, e := range tc.errs(false) {
				if strings.Contains(e.Error(), "Too many") {
					t.Fatalf("at the limit: %v", e)
				}
			}
			got := tc.errs(true)
			if len(got) == 0 || !strings.Contains(got[0].Error(), tc.want) {
				t.Fatalf("over the limit: got %v, want an error containing %q", got, tc.want)
			}
			for _, e := range got {
				if !strings.Contains(e.Error(), "Too many") {
					t.Fatalf("over the limit, the items were checked too: %v", e)
				}
			}
		})
	}
}

// limitOr is limit+1 when over, else limit.
func limitOr(over bool, limit int) int {
	if over {
		return limit + 1
	}
	return limit
}
