package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this package's kinds.
const GroupName = "resource.k8s.io"

// SchemeGroupVersion is the group and version of this package's kinds.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

var (
	// SchemeBuilder registers this package's kinds into a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&ResourceClass{}, &ResourceClassList{},
		&ResourceClaim{}, &ResourceClaimList{},
		&ResourceClaimTemplate{}, &ResourceClaimTemplateList{},
		&PodSchedulingContext{}, &PodSchedulingContextList{},
		&NodeResourceSlice{}, &NodeResourceSliceList{},
		&ResourceClaimParameters{}, &ResourceClaimParametersList{},
		&ResourceClassParameters{}, &ResourceClassParametersList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Resource qualifies a resource name with this package's group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}
