package auth

import (
	"fmt"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// fakeLookup is an in-memory Lookup.
type fakeLookup struct {
	classes map[string]*resourcev1alpha2.ResourceClass
	pods    map[string]*corev1.Pod
	claims  map[string]*resourcev1alpha2.ResourceClaim
	// v1claims are claims stored as resource.k8s.io/v1.
	v1claims map[string]*resourcev1.ResourceClaim
}

func newFakeLookup() *fakeLookup {
	return &fakeLookup{
		classes:  map[string]*resourcev1alpha2.ResourceClass{},
		pods:     map[string]*corev1.Pod{},
		claims:   map[string]*resourcev1alpha2.ResourceClaim{},
		v1claims: map[string]*resourcev1.ResourceClaim{},
	}
}

func (f *fakeLookup) withClass(c *resourcev1alpha2.ResourceClass) *fakeLookup {
	f.classes[c.Name] = c
	return f
}

func (f *fakeLookup) withPod(p *corev1.Pod) *fakeLookup {
	f.pods[p.Namespace+"/"+p.Name] = p
	return f
}

func (f *fakeLookup) withClaim(c *resourcev1alpha2.ResourceClaim) *fakeLookup {
	f.claims[c.Namespace+"/"+c.Name] = c
	return f
}

func (f *fakeLookup) GetResourceClass(name string) (*resourcev1alpha2.ResourceClass, error) {
	if c, ok := f.classes[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("resourceclass %q not found", name)
}

func (f *fakeLookup) GetPod(namespace, name string) (*corev1.Pod, error) {
	if p, ok := f.pods[namespace+"/"+name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
}

func (f *fakeLookup) withV1Claim(c *resourcev1.ResourceClaim) *fakeLookup {
	f.v1claims[c.Namespace+"/"+c.Name] = c
	return f
}

var claimsGR = schema.GroupResource{Group: resourcev1alpha2.GroupName, Resource: "resourceclaims"}

// GetResourceClaim returns a v1alpha2 claim, or for a v1 claim a view as
// the server gives: metadata and the StoredVersionAnnotation only.
func (f *fakeLookup) GetResourceClaim(namespace, name string) (*resourcev1alpha2.ResourceClaim, error) {
	if c, ok := f.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	if c, ok := f.v1claims[namespace+"/"+name]; ok {
		v := &resourcev1alpha2.ResourceClaim{ObjectMeta: *c.ObjectMeta.DeepCopy()}
		metav1.SetMetaDataAnnotation(&v.ObjectMeta, resourcev1alpha2.StoredVersionAnnotation, "resource.k8s.io/v1")
		return v, nil
	}
	return nil, apierrors.NewNotFound(claimsGR, name)
}

// GetResourceClaimV1 returns a v1 claim, or for a v1alpha2 claim a view
// with the StoredVersionAnnotation.
func (f *fakeLookup) GetResourceClaimV1(namespace, name string) (*resourcev1.ResourceClaim, error) {
	if c, ok := f.v1claims[namespace+"/"+name]; ok {
		return c, nil
	}
	if c, ok := f.claims[namespace+"/"+name]; ok {
		v := &resourcev1.ResourceClaim{ObjectMeta: *c.ObjectMeta.DeepCopy()}
		metav1.SetMetaDataAnnotation(&v.ObjectMeta, resourcev1alpha2.StoredVersionAnnotation, "resource.k8s.io/v1alpha2")
		return v, nil
	}
	return nil, apierrors.NewNotFound(claimsGR, name)
}

const testNS = "default"

func makeClass(name, driver string) *resourcev1alpha2.ResourceClass {
	return &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver}
}

// claimBuilder builds a ResourceClaim in testNS.
type claimBuilder struct {
	c *resourcev1alpha2.ResourceClaim
}

func makeClaim(name, class string) claimBuilder {
	return claimBuilder{&resourcev1alpha2.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, ResourceVersion: "1"},
		Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: class},
	}}
}

func (b claimBuilder) finalizer(f string) claimBuilder {
	b.c = b.c.DeepCopy()
	b.c.Finalizers = append(b.c.Finalizers, f)
	b.c.ResourceVersion = "2"
	return b
}

func (b claimBuilder) allocatedBy(driver string) claimBuilder {
	b.c = b.c.DeepCopy()
	b.c.Status.DriverName = driver
	b.c.Status.Allocation = &resourcev1alpha2.AllocationResult{}
	return b
}

func (b claimBuilder) label(k, v string) claimBuilder {
	b.c = b.c.DeepCopy()
	if b.c.Labels == nil {
		b.c.Labels = map[string]string{}
	}
	b.c.Labels[k] = v
	return b
}

func (b claimBuilder) annotation(k, v string) claimBuilder {
	b.c = b.c.DeepCopy()
	if b.c.Annotations == nil {
		b.c.Annotations = map[string]string{}
	}
	b.c.Annotations[k] = v
	return b
}

func (b claimBuilder) obj() *resourcev1alpha2.ResourceClaim { return b.c }

// podBuilder builds a Pod in testNS.
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) podBuilder {
	return podBuilder{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name)}}}
}

func (b podBuilder) node(n string) podBuilder {
	b.p.Spec.NodeName = n
	return b
}

// claim adds a spec.resourceClaims entry naming an existing claim.
func (b podBuilder) claim(entry, claimName string) podBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims,
		corev1.PodResourceClaim{Name: entry, ResourceClaimName: &claimName})
	return b
}

// templateClaim adds an entry from a template; generated, if not empty, is
// the claim name recorded in the pod's status.
func (b podBuilder) templateClaim(entry, template, generated string) podBuilder {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims,
		corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: &template})
	if generated != "" {
		b.p.Status.ResourceClaimStatuses = append(b.p.Status.ResourceClaimStatuses,
			corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: &generated})
	}
	return b
}

func (b podBuilder) obj() *corev1.Pod { return b.p }

func makeSlice(name, node string) *resourcev1alpha2.NodeResourceSlice {
	return &resourcev1alpha2.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1alpha2.NodeResourceSliceSpec{NodeName: node, DriverName: "gpu.example.com"},
	}
}

// makeResourceSlice returns a v1 ResourceSlice of one node ("" for a
// slice with allNodes) and driver.
// makeTaintRule is a DeviceTaintRule selecting the driver's devices
// (every device when driver is "").
func makeTaintRule(driver string) *resourcev1.DeviceTaintRule {
	r := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "rule"},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: &resourcev1.DeviceTaintSelector{},
			Taint: resourcev1.DeviceTaint{Key: "example.com/unhealthy", Effect: resourcev1.DeviceTaintEffectNoExecute}}}
	if driver != "" {
		r.Spec.DeviceSelector.Driver = ptr.To(driver)
	}
	return r
}

func makeResourceSlice(node, driver string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec:       resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	if node == "" {
		s.Spec.AllNodes = ptr.To(true)
	} else {
		s.Spec.NodeName = ptr.To(node)
	}
	return s
}

// v1ClaimOf returns a v1 claim allocated one device of driver ("" for
// none), with finalizers.
func v1ClaimOf(driver string, finalizers ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "v1", Namespace: testNS, Finalizers: finalizers}}
	if driver != "" {
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "n1", Device: "d0"}}}}
	}
	return c
}

// v1ClaimFor returns v1ClaimOf(driver) named name and reserved for pod
// with uid ("" for no reservation).
func v1ClaimFor(name, driver, pod string, uid types.UID) *resourcev1.ResourceClaim {
	c := v1ClaimOf(driver)
	c.Name = name
	if pod != "" {
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: uid}}
	}
	return c
}

// reservedFor reserves a v1alpha2 claim for pod.
func (b claimBuilder) reservedFor(pod string, uid types.UID) claimBuilder {
	b.c = b.c.DeepCopy()
	b.c.Status.ReservedFor = append(b.c.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: uid})
	return b
}

func withDeviceStatus(c *resourcev1.ResourceClaim, driver string) *resourcev1.ResourceClaim {
	c.Status.Devices = append(c.Status.Devices, resourcev1.AllocatedDeviceStatus{Driver: driver, Pool: "n1", Device: "d0"})
	return c
}

func withReservation(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: "u"})
	return c
}

func makeNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// withTaint returns a copy of n with the taint added.
func withTaint(n *corev1.Node, key string, effect corev1.TaintEffect) *corev1.Node {
	n = n.DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	return n
}

// makeNamespace returns a namespace with the labels.
func makeNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// podWithAnnotations returns pod p in testNS with the annotations.
func podWithAnnotations(ann map[string]string) *corev1.Pod {
	p := makePod("p").obj()
	p.Annotations = ann
	return p
}

// claimParams returns ResourceClaimParameters generated from group ("" for
// none).
func claimParams(group string) *resourcev1alpha2.ResourceClaimParameters {
	p := &resourcev1alpha2.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "params", Namespace: testNS}}
	if group != "" {
		p.GeneratedFrom = &resourcev1alpha2.ResourceClaimParametersReference{APIGroup: group, Kind: "CardParameters", Name: "p"}
	}
	return p
}

func classParams(group string) *resourcev1alpha2.ResourceClassParameters {
	p := &resourcev1alpha2.ResourceClassParameters{ObjectMeta: metav1.ObjectMeta{Name: "params"}}
	if group != "" {
		p.GeneratedFrom = &resourcev1alpha2.ResourceClassParametersReference{APIGroup: group, Kind: "CardClassParameters", Name: "p"}
	}
	return p
}

// clusterScoped are the built-in cluster-scoped resources.
var clusterScoped = map[string]bool{
	"nodes": true, "namespaces": true, "resourceclasses": true, "noderesourceslices": true,
	"resourceclassparameters": true, "customresourcedefinitions": true,
}

// attrs builds Attributes. The resource is written like kubectl's:
// "pods", "pods/status", "noderesourceslices.resource.k8s.io".
type attrs Attributes

func req(u User, verb, resource string) attrs {
	a := attrs{User: u, Verb: verb}
	rest, sub, _ := strings.Cut(resource, "/")
	a.Resource, a.APIGroup, _ = strings.Cut(rest, ".")
	a.Subresource = sub
	a.Namespaced = !clusterScoped[a.Resource]
	if a.Namespaced {
		a.Namespace = testNS
	}
	return a
}

func (a attrs) named(name string) attrs          { a.Name = name; return a }
func (a attrs) inNS(ns string) attrs             { a.Namespace = ns; return a }
func (a attrs) cluster() attrs                   { a.Namespaced = false; a.Namespace = ""; return a }
func (a attrs) object(o runtime.Object) attrs    { a.Object = o; return a }
func (a attrs) oldObject(o runtime.Object) attrs { a.OldObject = o; return a }
