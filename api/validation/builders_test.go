package validation

import (
	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Builders make valid fixtures; tests change one thing with `with`.

func objMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

type podBuilder struct{ p *corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{&corev1.Pod{
		ObjectMeta: objMeta(name, "default"),
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}}
}

// claim adds a pod claim for an existing ResourceClaim of the same name and
// lets the first container use it.
func (b *podBuilder) claim(name string) *podBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr(name)})
	c := &b.p.Spec.Containers[0]
	c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: name})
	return b
}

// templateClaim adds a pod claim generated from a template.
func (b *podBuilder) templateClaim(name, template string) *podBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr(template)})
	return b
}

func (b *podBuilder) container(name, image string) *podBuilder {
	b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{Name: name, Image: image})
	return b
}

func (b *podBuilder) initContainer(name, image string) *podBuilder {
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, corev1.Container{Name: name, Image: image})
	return b
}

// resources sets limits and requests of the first container.
func (b *podBuilder) resources(limits, requests corev1.ResourceList) *podBuilder {
	b.p.Spec.Containers[0].Resources.Limits = limits
	b.p.Spec.Containers[0].Resources.Requests = requests
	return b
}

func (b *podBuilder) with(f func(*corev1.Pod)) *podBuilder { f(b.p); return b }
func (b *podBuilder) obj() *corev1.Pod                     { return b.p }

type nodeBuilder struct{ n *corev1.Node }

func makeNode(name string) *nodeBuilder {
	return &nodeBuilder{&corev1.Node{
		ObjectMeta: objMeta(name, ""),
		Status: corev1.NodeStatus{
			Capacity:    rl("cpu=4", "memory=8Gi", "pods=110"),
			Allocatable: rl("cpu=4", "memory=8Gi", "pods=110"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}}
}

func (b *nodeBuilder) taint(key, value string, effect corev1.TaintEffect) *nodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}

func (b *nodeBuilder) with(f func(*corev1.Node)) *nodeBuilder { f(b.n); return b }
func (b *nodeBuilder) obj() *corev1.Node                      { return b.n }

type claimBuilder struct {
	c *resourcev1alpha2.ResourceClaim
}

func makeClaim(name string) *claimBuilder {
	return &claimBuilder{&resourcev1alpha2.ResourceClaim{
		ObjectMeta: objMeta(name, "default"),
		Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"},
	}}
}

// allocated gives the claim an allocation by the cards driver with one
// structured handle.
func (b *claimBuilder) allocated() *claimBuilder {
	b.c.Status.DriverName = "cards.example.com"
	b.c.Status.Allocation = &resourcev1alpha2.AllocationResult{
		ResourceHandles: []resourcev1alpha2.ResourceHandle{{
			DriverName: "cards.example.com",
			StructuredData: &resourcev1alpha2.StructuredResourceHandle{
				NodeName:      "worker-1",
				Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{{ID: "gpu-0"}}},
			},
		}},
	}
	return b
}

func (b *claimBuilder) reservedFor(names ...string) *claimBuilder {
	for _, n := range names {
		b.c.Status.ReservedFor = append(b.c.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", Name: n, UID: types.UID("uid-" + n)})
	}
	return b
}

func (b *claimBuilder) with(f func(*resourcev1alpha2.ResourceClaim)) *claimBuilder {
	f(b.c)
	return b
}
func (b *claimBuilder) obj() *resourcev1alpha2.ResourceClaim { return b.c }

type sliceBuilder struct {
	s *resourcev1alpha2.NodeResourceSlice
}

// makeSlice has a common group "gpu" and one instance "gpu-0" using it.
func makeSlice(name string) *sliceBuilder {
	return &sliceBuilder{&resourcev1alpha2.NodeResourceSlice{
		ObjectMeta: objMeta(name, ""),
		Spec: resourcev1alpha2.NodeResourceSliceSpec{
			NodeName: "worker-1", DriverName: "cards.example.com",
			NodeResourceModel: resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{
				CommonAttributes:  []resourcev1alpha2.AttributeGroup{{Name: "gpu", Attributes: []resourcev1alpha2.Attribute{strAttr("type", "GPU")}}},
				ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "gpu-0", CommonAttributesRefs: []string{"gpu"}}},
			}},
		},
	}}
}

func (b *sliceBuilder) with(f func(*resourcev1alpha2.PartitionableResources)) *sliceBuilder {
	f(b.s.Spec.Partitionable)
	return b
}
func (b *sliceBuilder) spec(f func(*resourcev1alpha2.NodeResourceSliceSpec)) *sliceBuilder {
	f(&b.s.Spec)
	return b
}
func (b *sliceBuilder) obj() *resourcev1alpha2.NodeResourceSlice { return b.s }

func strAttr(name, v string) resourcev1alpha2.Attribute {
	return resourcev1alpha2.Attribute{Name: name, AttributeValue: resourcev1alpha2.AttributeValue{String: &v}}
}

func versionAttr(name, v string) resourcev1alpha2.Attribute {
	return resourcev1alpha2.Attribute{Name: name, AttributeValue: resourcev1alpha2.AttributeValue{Version: &v}}
}

// instance and group build a nested instance tree.
func instance(name string, groups ...resourcev1alpha2.ResourceInstanceGroup) resourcev1alpha2.ResourceInstance {
	return resourcev1alpha2.ResourceInstance{Name: name, Partitions: groups}
}

func group(name string, instances ...resourcev1alpha2.ResourceInstance) resourcev1alpha2.ResourceInstanceGroup {
	return resourcev1alpha2.ResourceInstanceGroup{Name: name, ResourceInstances: instances}
}

type crdBuilder struct {
	c *apiextv1.CustomResourceDefinition
}

// makeCRD builds widgets.example.com with one served storage version v1
// whose schema has spec.size (integer).
func makeCRD() *crdBuilder {
	return &crdBuilder{&apiextv1.CustomResourceDefinition{
		ObjectMeta: objMeta("widgets.example.com", ""),
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextv1.JSONSchemaProps{"spec": {
						Type:       "object",
						Properties: map[string]apiextv1.JSONSchemaProps{"size": {Type: "integer"}},
					}},
				}},
			}},
		},
	}}
}

// schema changes the root schema of the first version.
func (b *crdBuilder) schema(f func(*apiextv1.JSONSchemaProps)) *crdBuilder {
	f(b.c.Spec.Versions[0].Schema.OpenAPIV3Schema)
	return b
}

func (b *crdBuilder) with(f func(*apiextv1.CustomResourceDefinition)) *crdBuilder {
	f(b.c)
	return b
}
func (b *crdBuilder) obj() *apiextv1.CustomResourceDefinition { return b.c }

func raw(json string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(json)} }
