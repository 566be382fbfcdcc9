package client

import (
	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// Typed clients of the built-in kinds. Namespaced kinds take a namespace;
// "" means all namespaces (see the package doc).
type (
	PodClient                     = Resource[*corev1.Pod, *corev1.PodList]
	NodeClient                    = Resource[*corev1.Node, *corev1.NodeList]
	NamespaceClient               = Resource[*corev1.Namespace, *corev1.NamespaceList]
	EventClient                   = Resource[*corev1.Event, *corev1.EventList]
	ResourceQuotaClient           = Resource[*corev1.ResourceQuota, *corev1.ResourceQuotaList]
	ResourceClassClient           = Resource[*resourcev1alpha2.ResourceClass, *resourcev1alpha2.ResourceClassList]
	ResourceClaimClient           = Resource[*resourcev1alpha2.ResourceClaim, *resourcev1alpha2.ResourceClaimList]
	ResourceClaimTemplateClient   = Resource[*resourcev1alpha2.ResourceClaimTemplate, *resourcev1alpha2.ResourceClaimTemplateList]
	PodSchedulingContextClient    = Resource[*resourcev1alpha2.PodSchedulingContext, *resourcev1alpha2.PodSchedulingContextList]
	NodeResourceSliceClient       = Resource[*resourcev1alpha2.NodeResourceSlice, *resourcev1alpha2.NodeResourceSliceList]
	ResourceClaimParametersClient = Resource[*resourcev1alpha2.ResourceClaimParameters, *resourcev1alpha2.ResourceClaimParametersList]
	ResourceClassParametersClient = Resource[*resourcev1alpha2.ResourceClassParameters, *resourcev1alpha2.ResourceClassParametersList]
	CRDClient                     = Resource[*apiextv1.CustomResourceDefinition, *apiextv1.CustomResourceDefinitionList]

	// resource.k8s.io/v1, Kubernetes' own types.
	DeviceClassClient             = Resource[*resourcev1.DeviceClass, *resourcev1.DeviceClassList]
	ResourceSliceClient           = Resource[*resourcev1.ResourceSlice, *resourcev1.ResourceSliceList]
	DeviceTaintRuleClient         = Resource[*resourcev1.DeviceTaintRule, *resourcev1.DeviceTaintRuleList]
	ResourceClaimV1Client         = Resource[*resourcev1.ResourceClaim, *resourcev1.ResourceClaimList]
	ResourceClaimTemplateV1Client = Resource[*resourcev1.ResourceClaimTemplate, *resourcev1.ResourceClaimTemplateList]

	// coordination.k8s.io/v1.
	LeaseClient = Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
)

// Leases is the typed client of coordination.k8s.io/v1 Leases in ns.
func (c *Client) Leases(ns string) *LeaseClient {
	return newResource(c.coord, coordinationv1.SchemeGroupVersion, "leases", ns, true,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}

// DeviceClasses is the typed client of resource.k8s.io/v1 DeviceClasses.
func (c *Client) DeviceClasses() *DeviceClassClient {
	return newResource(c.resourceV1, resourcev1.SchemeGroupVersion, "deviceclasses", "", false,
		func() *resourcev1.DeviceClass { return &resourcev1.DeviceClass{} },
		func() *resourcev1.DeviceClassList { return &resourcev1.DeviceClassList{} })
}

// ResourceSlices is the typed client of resource.k8s.io/v1 ResourceSlices.
func (c *Client) ResourceSlices() *ResourceSliceClient {
	return newResource(c.resourceV1, resourcev1.SchemeGroupVersion, "resourceslices", "", false,
		func() *resourcev1.ResourceSlice { return &resourcev1.ResourceSlice{} },
		func() *resourcev1.ResourceSliceList { return &resourcev1.ResourceSliceList{} })
}

// DeviceTaintRules is the typed client of resource.k8s.io/v1 DeviceTaintRules.
func (c *Client) DeviceTaintRules() *DeviceTaintRuleClient {
	return newResource(c.resourceV1, resourcev1.SchemeGroupVersion, "devicetaintrules", "", false,
		func() *resourcev1.DeviceTaintRule { return &resourcev1.DeviceTaintRule{} },
		func() *resourcev1.DeviceTaintRuleList { return &resourcev1.DeviceTaintRuleList{} })
}

// ResourceClaimsV1 is the typed client of resource.k8s.io/v1 ResourceClaims
// in ns. Claims written as v1alpha2 appear as views
// (resourcev1alpha2.IsView); informers leave them out.
func (c *Client) ResourceClaimsV1(ns string) *ResourceClaimV1Client {
	return newResource(c.resourceV1, resourcev1.SchemeGroupVersion, "resourceclaims", ns, true,
		func() *resourcev1.ResourceClaim { return &resourcev1.ResourceClaim{} },
		func() *resourcev1.ResourceClaimList { return &resourcev1.ResourceClaimList{} })
}

// ResourceClaimTemplatesV1 is the typed client of resource.k8s.io/v1
// ResourceClaimTemplates in ns; as ResourceClaimsV1 for views.
func (c *Client) ResourceClaimTemplatesV1(ns string) *ResourceClaimTemplateV1Client {
	return newResource(c.resourceV1, resourcev1.SchemeGroupVersion, "resourceclaimtemplates", ns, true,
		func() *resourcev1.ResourceClaimTemplate { return &resourcev1.ResourceClaimTemplate{} },
		func() *resourcev1.ResourceClaimTemplateList { return &resourcev1.ResourceClaimTemplateList{} })
}

// Pods is the typed client of v1 Pods in ns.
func (c *Client) Pods(ns string) *PodClient {
	return newResource(c.core, corev1.SchemeGroupVersion, "pods", ns, true,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

// Nodes is the typed client of v1 Nodes.
func (c *Client) Nodes() *NodeClient {
	return newResource(c.core, corev1.SchemeGroupVersion, "nodes", "", false,
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

// Namespaces is the typed client of v1 Namespaces.
func (c *Client) Namespaces() *NamespaceClient {
	return newResource(c.core, corev1.SchemeGroupVersion, "namespaces", "", false,
		func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
}

// Events is the typed client of v1 Events in ns.
func (c *Client) Events(ns string) *EventClient {
	return newResource(c.core, corev1.SchemeGroupVersion, "events", ns, true,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

// ResourceQuotas is the typed client of v1 ResourceQuotas in ns.
func (c *Client) ResourceQuotas(ns string) *ResourceQuotaClient {
	return newResource(c.core, corev1.SchemeGroupVersion, "resourcequotas", ns, true,
		func() *corev1.ResourceQuota { return &corev1.ResourceQuota{} },
		func() *corev1.ResourceQuotaList { return &corev1.ResourceQuotaList{} })
}

// ResourceClasses is the typed client of ResourceClasses.
func (c *Client) ResourceClasses() *ResourceClassClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "resourceclasses", "", false,
		func() *resourcev1alpha2.ResourceClass { return &resourcev1alpha2.ResourceClass{} },
		func() *resourcev1alpha2.ResourceClassList { return &resourcev1alpha2.ResourceClassList{} })
}

// ResourceClaims is the typed client of ResourceClaims in ns.
func (c *Client) ResourceClaims(ns string) *ResourceClaimClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "resourceclaims", ns, true,
		func() *resourcev1alpha2.ResourceClaim { return &resourcev1alpha2.ResourceClaim{} },
		func() *resourcev1alpha2.ResourceClaimList { return &resourcev1alpha2.ResourceClaimList{} })
}

// ResourceClaimTemplates is the typed client of ResourceClaimTemplates in ns.
func (c *Client) ResourceClaimTemplates(ns string) *ResourceClaimTemplateClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "resourceclaimtemplates", ns, true,
		func() *resourcev1alpha2.ResourceClaimTemplate { return &resourcev1alpha2.ResourceClaimTemplate{} },
		func() *resourcev1alpha2.ResourceClaimTemplateList {
			return &resourcev1alpha2.ResourceClaimTemplateList{}
		})
}

// PodSchedulingContexts is the typed client of PodSchedulingContexts in ns.
func (c *Client) PodSchedulingContexts(ns string) *PodSchedulingContextClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "podschedulingcontexts", ns, true,
		func() *resourcev1alpha2.PodSchedulingContext { return &resourcev1alpha2.PodSchedulingContext{} },
		func() *resourcev1alpha2.PodSchedulingContextList { return &resourcev1alpha2.PodSchedulingContextList{} })
}

// NodeResourceSlices is the typed client of NodeResourceSlices.
func (c *Client) NodeResourceSlices() *NodeResourceSliceClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "noderesourceslices", "", false,
		func() *resourcev1alpha2.NodeResourceSlice { return &resourcev1alpha2.NodeResourceSlice{} },
		func() *resourcev1alpha2.NodeResourceSliceList { return &resourcev1alpha2.NodeResourceSliceList{} })
}

// ResourceClaimParameters is the typed client of ResourceClaimParameters in ns.
func (c *Client) ResourceClaimParameters(ns string) *ResourceClaimParametersClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "resourceclaimparameters", ns, true,
		func() *resourcev1alpha2.ResourceClaimParameters { return &resourcev1alpha2.ResourceClaimParameters{} },
		func() *resourcev1alpha2.ResourceClaimParametersList {
			return &resourcev1alpha2.ResourceClaimParametersList{}
		})
}

// ResourceClassParameters is the typed client of ResourceClassParameters.
func (c *Client) ResourceClassParameters() *ResourceClassParametersClient {
	return newResource(c.resource, resourcev1alpha2.SchemeGroupVersion, "resourceclassparameters", "", false,
		func() *resourcev1alpha2.ResourceClassParameters { return &resourcev1alpha2.ResourceClassParameters{} },
		func() *resourcev1alpha2.ResourceClassParametersList {
			return &resourcev1alpha2.ResourceClassParametersList{}
		})
}

// CustomResourceDefinitions is the typed client of CRDs.
func (c *Client) CustomResourceDefinitions() *CRDClient {
	return newResource(c.apiext, apiextv1.SchemeGroupVersion, "customresourcedefinitions", "", false,
		func() *apiextv1.CustomResourceDefinition { return &apiextv1.CustomResourceDefinition{} },
		func() *apiextv1.CustomResourceDefinitionList { return &apiextv1.CustomResourceDefinitionList{} })
}
