package fabricdriver

import "k8s.io/apimachinery/pkg/runtime/schema"

// Names of the driver.
const (
	// DriverName is the driver's name: the driverName and controllerName
	// of its class, and the name its kubelet plugin registers.
	DriverName = "fabric.example.com"
	// CDIKind is the CDI kind of the devices the kubelet plugin hands out.
	CDIKind = DriverName + "/accelerator"

	// Group, Version, Kind and Resource of the claim parameters kind
	// FabricClaimParameters.
	Group    = "fabric.example.com"
	Version  = "v1alpha1"
	Kind     = "FabricClaimParameters"
	Resource = "fabricclaimparameters"
)

// GroupVersionResource is the FabricClaimParameters resource.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Environment variables of containers using a claim of the driver.
const (
	// EnvUnits lists the claim's unit IDs, comma-separated; empty when an
	// optional request got nothing.
	EnvUnits = "FABRIC_UNITS"
	// EnvPool is the pool the units come from ("" when none).
	EnvPool = "FABRIC_POOL"
	// EnvModel is the units' model ("" when none).
	EnvModel = "FABRIC_MODEL"
)
