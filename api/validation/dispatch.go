package validation

import (
	"fmt"
	"reflect"

	coordinationv1 "k8s.io/api/coordination/v1"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a new object of any built-in kind. A custom resource
// (*unstructured.Unstructured) gets only its apiVersion, kind and metadata
// checked: its schema lives in its CRD, see ValidateCustomResource.
func Validate(obj runtime.Object) field.ErrorList {
	if !isNil(obj) {
		// Quantities first: one the kind's checks could not compare in
		// bounded time (see MaxQuantityExponent) stops them.
		if errs := ValidateQuantities(obj); len(errs) > 0 {
			return errs
		}
	}
	return validateKind(obj)
}

func validateKind(obj runtime.Object) field.ErrorList {
	if isNil(obj) {
		return unknownKind(obj)
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		return ValidateNamespace(o)
	case *corev1.Node:
		return ValidateNode(o)
	case *corev1.Pod:
		return ValidatePod(o)
	case *corev1.Event:
		return ValidateEvent(o)
	case *corev1.ResourceQuota:
		return ValidateResourceQuota(o)
	case *corev1.Binding:
		return ValidateBinding(o)
	case *resourcev1alpha2.ResourceClass:
		return ValidateResourceClass(o)
	case *resourcev1alpha2.ResourceClaim:
		return ValidateResourceClaim(o)
	case *resourcev1alpha2.ResourceClaimTemplate:
		return ValidateResourceClaimTemplate(o)
	case *resourcev1alpha2.PodSchedulingContext:
		return ValidatePodSchedulingContext(o)
	case *resourcev1alpha2.NodeResourceSlice:
		return ValidateNodeResourceSlice(o)
	case *resourcev1alpha2.ResourceClaimParameters:
		return ValidateResourceClaimParameters(o)
	case *resourcev1alpha2.ResourceClassParameters:
		return ValidateResourceClassParameters(o)
	case *resourcev1.DeviceClass:
		return ValidateDeviceClass(o)
	case *resourcev1.ResourceSlice:
		return ValidateResourceSlice(o)
	case *resourcev1.DeviceTaintRule:
		return ValidateDeviceTaintRule(o)
	case *resourcev1.ResourceClaim:
		return ValidateResourceClaimV1(o)
	case *resourcev1.ResourceClaimTemplate:
		return ValidateResourceClaimTemplateV1(o)
	case *coordinationv1.Lease:
		return ValidateLease(o)
	case *apiextv1.CustomResourceDefinition:
		return ValidateCustomResourceDefinition(o)
	case *unstructured.Unstructured:
		return ValidateCustomResource(nil, o.Object)
	}
	return unknownKind(obj)
}

// ValidateUpdate checks a write of newObj over oldObj, which must be of the
// same type.
func ValidateUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if !isNil(newObj) {
		// Quantities first: one the kind's checks could not compare in
		// bounded time (see MaxQuantityExponent) stops them.
		if errs := ValidateQuantities(newObj); len(errs) > 0 {
			return errs
		}
	}
	return validateKindUpdate(newObj, oldObj)
}

func validateKindUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if errs := sameType(newObj, oldObj); len(errs) > 0 {
		return errs
	}
	switch o := newObj.(type) {
	case *corev1.Namespace:
		return ValidateNamespaceUpdate(o, oldObj.(*corev1.Namespace))
	case *corev1.Node:
		return ValidateNodeUpdate(o, oldObj.(*corev1.Node))
	case *corev1.Pod:
		return ValidatePodUpdate(o, oldObj.(*corev1.Pod))
	case *corev1.Event:
		return ValidateEventUpdate(o, oldObj.(*corev1.Event))
	case *corev1.ResourceQuota:
		return ValidateResourceQuotaUpdate(o, oldObj.(*corev1.ResourceQuota))
	case *corev1.Binding:
		return ValidateBindingUpdate(o, oldObj.(*corev1.Binding))
	case *resourcev1alpha2.ResourceClass:
		return ValidateResourceClassUpdate(o, oldObj.(*resourcev1alpha2.ResourceClass))
	case *resourcev1alpha2.ResourceClaim:
		return ValidateResourceClaimUpdate(o, oldObj.(*resourcev1alpha2.ResourceClaim))
	case *resourcev1alpha2.ResourceClaimTemplate:
		return ValidateResourceClaimTemplateUpdate(o, oldObj.(*resourcev1alpha2.ResourceClaimTemplate))
	case *resourcev1alpha2.PodSchedulingContext:
		return ValidatePodSchedulingContextUpdate(o, oldObj.(*resourcev1alpha2.PodSchedulingContext))
	case *resourcev1alpha2.NodeResourceSlice:
		return ValidateNodeResourceSliceUpdate(o, oldObj.(*resourcev1alpha2.NodeResourceSlice))
	case *resourcev1alpha2.ResourceClaimParameters:
		return ValidateResourceClaimParametersUpdate(o, oldObj.(*resourcev1alpha2.ResourceClaimParameters))
	case *resourcev1alpha2.ResourceClassParameters:
		return ValidateResourceClassParametersUpdate(o, oldObj.(*resourcev1alpha2.ResourceClassParameters))
	case *resourcev1.DeviceClass:
		return ValidateDeviceClassUpdate(o, oldObj.(*resourcev1.DeviceClass))
	case *resourcev1.ResourceSlice:
		return ValidateResourceSliceUpdate(o, oldObj.(*resourcev1.ResourceSlice))
	case *resourcev1.DeviceTaintRule:
		return ValidateDeviceTaintRuleUpdate(o, oldObj.(*resourcev1.DeviceTaintRule))
	case *resourcev1.ResourceClaim:
		return ValidateResourceClaimV1Update(o, oldObj.(*resourcev1.ResourceClaim))
	case *resourcev1.ResourceClaimTemplate:
		return ValidateResourceClaimTemplateV1Update(o, oldObj.(*resourcev1.ResourceClaimTemplate))
	case *coordinationv1.Lease:
		return ValidateLeaseUpdate(o, oldObj.(*coordinationv1.Lease))
	case *apiextv1.CustomResourceDefinition:
		return ValidateCustomResourceDefinitionUpdate(o, oldObj.(*apiextv1.CustomResourceDefinition))
	case *unstructured.Unstructured:
		return ValidateCustomResourceUpdate(nil, o.Object, oldObj.(*unstructured.Unstructured).Object)
	}
	return unknownKind(newObj)
}

// ValidateStatusUpdate checks a write to the status of a kind that has
// one. For other kinds it reports that they have no status.
func ValidateStatusUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if !isNil(newObj) {
		// Quantities first: one the kind's checks could not compare in
		// bounded time (see MaxQuantityExponent) stops them.
		if errs := ValidateQuantities(newObj); len(errs) > 0 {
			return errs
		}
	}
	return validateKindStatusUpdate(newObj, oldObj)
}

func validateKindStatusUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if errs := sameType(newObj, oldObj); len(errs) > 0 {
		return errs
	}
	switch o := newObj.(type) {
	case *corev1.Namespace:
		return ValidateNamespaceStatusUpdate(o, oldObj.(*corev1.Namespace))
	case *corev1.Node:
		return ValidateNodeStatusUpdate(o, oldObj.(*corev1.Node))
	case *corev1.Pod:
		return ValidatePodStatusUpdate(o, oldObj.(*corev1.Pod))
	case *corev1.ResourceQuota:
		return ValidateResourceQuotaStatusUpdate(o, oldObj.(*corev1.ResourceQuota))
	case *resourcev1alpha2.ResourceClaim:
		return ValidateResourceClaimStatusUpdate(o, oldObj.(*resourcev1alpha2.ResourceClaim))
	case *resourcev1alpha2.PodSchedulingContext:
		return ValidatePodSchedulingContextStatusUpdate(o, oldObj.(*resourcev1alpha2.PodSchedulingContext))
	case *resourcev1.ResourceClaim:
		return ValidateResourceClaimV1StatusUpdate(o, oldObj.(*resourcev1.ResourceClaim))
	case *resourcev1.DeviceTaintRule:
		return ValidateDeviceTaintRuleStatusUpdate(o, oldObj.(*resourcev1.DeviceTaintRule))
	case *apiextv1.CustomResourceDefinition:
		return ValidateCustomResourceDefinitionStatusUpdate(o, oldObj.(*apiextv1.CustomResourceDefinition))
	}
	return field.ErrorList{field.NotFound(field.NewPath("status"), fmt.Sprintf("%T", newObj))}
}

// Default applies the defaults of a built-in kind; other objects are left
// alone (custom resources: see DefaultCustomResource).
func Default(obj runtime.Object) {
	if isNil(obj) {
		return
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		DefaultNamespace(o)
	case *corev1.Pod:
		DefaultPod(o)
	case *resourcev1alpha2.ResourceClaim:
		DefaultResourceClaim(o)
	case *resourcev1alpha2.ResourceClaimTemplate:
		DefaultResourceClaimTemplate(o)
	case *resourcev1.ResourceClaim:
		DefaultResourceClaimV1(o)
	case *resourcev1.ResourceClaimTemplate:
		DefaultResourceClaimTemplateV1(o)
	case *apiextv1.CustomResourceDefinition:
		DefaultCustomResourceDefinition(o)
	}
}

func sameType(newObj, oldObj runtime.Object) field.ErrorList {
	if isNil(newObj) || isNil(oldObj) {
		return unknownKind(nil)
	}
	if reflect.TypeOf(newObj) != reflect.TypeOf(oldObj) {
		return field.ErrorList{field.Invalid(field.NewPath("kind"), fmt.Sprintf("%T", newObj), fmt.Sprintf("an update may not change the kind (stored object is %T)", oldObj))}
	}
	return nil
}

// isNil reports a nil interface or a typed nil pointer.
func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
