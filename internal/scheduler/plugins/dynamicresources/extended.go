package dynamicresources

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
)

// Extended resources through DRA (KEP-5004). A container's extended
// resource R (example.com/gpu, or deviceclass.resource.kubernetes.io/CLASS)
// is served by DRA on a node whose allocatable lacks R (no device plugin
// there advertises it) when a DeviceClass maps R
// (allocator.Catalog.ExtendedResourceClass); NodeResourcesFit leaves such
// names to this plugin (noderesources.ServedByDRA). On such a node the pod
// gets one more v1 claim, built in memory: one request per container and
// name, container-I-request-J (I counts init containers, then containers;
// J the container's DRA-served names in order), asking count = quantity
// devices of the class. It is allocated with the pod's other v1 claims by
// the one engine. Which names DRA serves depends on the node, so the claim
// is built per set of names (a variant); most clusters have one.
//
// The claim exists only in memory until the binding: the scheduler creates
// it (ClaimToCreate, generateName POD-extended-resources-) just
// before posting the Binding, which carries its allocation and
// extendedResourceClaimStatus, and deletes it when the binding fails.

// extRequest is one container's request of an extended resource that a
// DeviceClass maps.
type extRequest struct {
	container int // index over init containers, then containers
	name      string
	resource  corev1.ResourceName
	count     int64
	class     string
}

// extendedPart is the pod's extended resources DRA may serve, and the
// claims built for the sets of names nodes leave to DRA.
type extendedPart struct {
	reqs     []extRequest
	mu       sync.Mutex
	variants map[string]*extVariant // by served names, joined
}

// extVariant is the pod's v1 claims on nodes where DRA serves one set of
// the pod's extended resources: the pod's own v1 claims and the claim
// built for those names, last.
type extVariant struct {
	served   []corev1.ResourceName
	claim    *resourcev1.ResourceClaim
	mappings []corev1.ContainerExtendedResourceRequest
	claims   []allocator.V1Claim
	req      *allocator.V1Request
}

// ExtendedClaimSuffix ends the generateName of a pod's extended-resource
// claim: POD-extended-resources-XXXXX.
const ExtendedClaimSuffix = "-extended-resources-"

// extendedRequests lists the pod's container requests of extended
// resources that a DeviceClass in cat maps, containers in the order of
// container-I-request-J, names sorted within a container.
func extendedRequests(pod *corev1.Pod, cat *allocator.Catalog) []extRequest {
	var out []extRequest
	i := 0
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, name := range sortedResourceNames(c.Resources) {
				class := cat.ExtendedResourceClass(string(name))
				if class == nil {
					continue
				}
				q, ok := c.Resources.Requests[name]
				if !ok {
					q = c.Resources.Limits[name]
				}
				if q.Sign() <= 0 {
					continue
				}
				out = append(out, extRequest{container: i, name: c.Name, resource: name, count: q.Value(), class: class.Name})
			}
			i++
		}
	}
	return out
}

// sortedResourceNames are the extended resource names a container
// requests or limits, sorted.
func sortedResourceNames(r corev1.ResourceRequirements) []corev1.ResourceName {
	var out []corev1.ResourceName
	add := func(l corev1.ResourceList) {
		for n := range l {
			if (strings.Contains(string(n), "/") && !slices.Contains(out, n)) && !strings.HasPrefix(string(n), "requests.") {
				out = append(out, n)
			}
		}
	}
	add(r.Requests)
	add(r.Limits)
	slices.Sort(out)
	return out
}

// served is the set of the pod's extended resources DRA serves on a node
// whose allocatable is alloc: those the node has none of.
func (e *extendedPart) served(alloc framework.Resource) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, r := range e.reqs {
		if alloc.Scalar[r.resource] == 0 && !slices.Contains(out, r.resource) {
			out = append(out, r.resource)
		}
	}
	slices.Sort(out)
	return out
}

// variant returns the pod's v1 claims for a node where DRA serves these
// names, built once per set; nil when it serves none.
func (s *stateData) variant(pod *corev1.Pod, served []corev1.ResourceName) *extVariant {
	e := s.v1.ext
	if e == nil || len(served) == 0 {
		return nil
	}
	key := fmt.Sprint(served)
	e.mu.Lock()
	defer e.mu.Unlock()
	if v := e.variants[key]; v != nil {
		return v
	}
	v := &extVariant{served: served, claim: extendedClaim(pod, e.reqs, served)}
	j := map[int]int{}
	for _, r := range e.reqs {
		if !slices.Contains(served, r.resource) {
			continue
		}
		v.mappings = append(v.mappings, corev1.ContainerExtendedResourceRequest{
			ContainerName: r.name, ResourceName: string(r.resource), RequestName: requestName(r.container, j[r.container])})
		j[r.container]++
	}
	v.claims = append(slices.Clip(s.v1.claims), allocator.V1Claim{Claim: v.claim})
	v.req = allocator.PrepareV1(pod, v.claims, s.objects.catalog.DeviceClass)
	if e.variants == nil {
		e.variants = map[string]*extVariant{}
	}
	e.variants[key] = v
	return v
}

func requestName(container, j int) string {
	return fmt.Sprintf("container-%d-request-%d", container, j)
}

// extendedClaimName is the in-memory name of the pod's extended-resource
// claim until the scheduler creates it with a generated name.
func extendedClaimName(pod *corev1.Pod) string {
	return pod.Name + strings.TrimSuffix(ExtendedClaimSuffix, "-")
}

// extendedClaim builds the claim of the pod's extended resources that DRA
// serves (served): marked as Kubernetes marks it, the pod its controller.
func extendedClaim(pod *corev1.Pod, reqs []extRequest, served []corev1.ResourceName) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: extendedClaimName(pod), GenerateName: pod.Name + ExtendedClaimSuffix,
			Annotations:     map[string]string{corev1.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{allocator.PodOwnerReference(pod)},
		},
	}
	j := map[int]int{}
	for _, r := range reqs {
		if !slices.Contains(served, r.resource) {
			continue
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{
			Name: requestName(r.container, j[r.container]),
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r.class,
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: r.count},
		})
		j[r.container]++
	}
	return c
}

// servedStatus is the Filter status of a node where the pod's extended
// resources served by DRA do not fit: it says which class serves each
// name, then why the allocation failed.
func servedStatus(v *extVariant, reqs []extRequest, rs []allocator.Reason) *framework.Status {
	st := nodeStatus(rs)
	var names []string
	for _, n := range v.served {
		i := slices.IndexFunc(reqs, func(r extRequest) bool { return r.resource == n })
		names = append(names, fmt.Sprintf("%s: served by DRA class %s", n, reqs[i].class))
	}
	return framework.NewStatus(st.Code(), append([]string{strings.Join(names, ", ")}, st.Reasons()...)...).WithPlugin(Name)
}

// variantOn is the pod's v1 claims on node when DRA serves some of its
// extended resources there, nil otherwise.
func (s *stateData) variantOn(node *corev1.Node) *extVariant {
	if s.v1 == nil || s.v1.ext == nil || node == nil {
		return nil
	}
	return s.variant(s.v1.pod, s.v1.ext.served(framework.NewResource(node.Status.Allocatable)))
}

// isExtended reports whether chosen claim i is the pod's extended-resource
// claim (the last one, when Reserve chose a variant).
func (v *v1Part) isExtended(i int) bool {
	return v.variant != nil && i == len(v.chosen)-1
}

// ClaimToCreate implements framework.BindClaimMaker: the claim that the
// binding of the cycle's pod needs created first, the claim of its
// extended resources that DRA serves on the chosen node, to be created
// with its generateName; nil when there is none.
func (*DynamicResources) ClaimToCreate(state *framework.CycleState) *resourcev1.ResourceClaim {
	s, ok := readState(state)
	if !ok || s.v1 == nil || s.v1.variant == nil || len(s.v1.chosen) == 0 {
		return nil
	}
	c := s.v1.variant.claim.DeepCopy()
	c.Name = ""
	return c
}

// ClaimCreated implements framework.BindClaimMaker: the pod's
// extended-resource claim was created as created. The Binding b (filled
// by ContributeBinding) names it, with its resourceVersion, in its claims
// and its extendedResourceClaimStatus, and the cycle keeps the name for
// PostBind.
func (*DynamicResources) ClaimCreated(state *framework.CycleState, b *corev1.Binding, created *resourcev1.ResourceClaim) error {
	s, ok := readState(state)
	if !ok || s.v1 == nil || s.v1.variant == nil || len(s.v1.chosen) == 0 {
		return fmt.Errorf("%s: no extended-resource claim in the cycle", Name)
	}
	last := len(s.v1.chosen) - 1
	old := s.v1.chosen[last].Name
	i := slices.IndexFunc(b.ResourceClaims, func(c corev1.BindingResourceClaim) bool { return c.Name == old })
	if i < 0 || b.ExtendedResourceClaimStatus == nil {
		return fmt.Errorf("%s: the binding does not carry the extended-resource claim %s", Name, old)
	}
	b.ResourceClaims[i].Name, b.ResourceClaims[i].ResourceVersion = created.Name, created.ResourceVersion
	b.ExtendedResourceClaimStatus.ResourceClaimName = created.Name
	s.v1.created = created.Name
	return nil
}

// rekeyExtended moves the pod's in-memory extended-resource claim, once
// bound, to the name it was created with, so that it ends when the
// objects show that claim at or after the binding. Callers hold p.mu.
func (p *DynamicResources) rekeyExtended(s *stateData, self string) {
	v := s.v1
	if v == nil || v.variant == nil || v.created == "" || len(v.chosen) == 0 {
		return
	}
	old := claimKeyV1(v.chosen[len(v.chosen)-1])
	m := p.reserved[old]
	if m == nil || m.pod != self || m.v1 == nil {
		return
	}
	delete(p.reserved, old)
	c := m.v1.DeepCopy()
	c.Name = v.created
	m.v1 = c
	p.reserved[claimKeyV1(c)] = m
}

// nodeExtendedHint queues a pod on a node update that changes the node's
// allocatable of an extended resource the pod asks for: a device plugin
// appearing there serves the name instead of DRA, one going away leaves
// it to DRA.
func nodeExtendedHint(pod *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 || o == nil || n == nil {
		return framework.QueueSkip
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, name := range sortedResourceNames(c.Resources) {
				before, had := o.Status.Allocatable[name]
				after, has := n.Status.Allocatable[name]
				if had != has || before.Cmp(after) != 0 {
					return framework.Queue
				}
			}
		}
	}
	return framework.QueueSkip
}
