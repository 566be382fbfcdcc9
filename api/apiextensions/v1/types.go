package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true

// CustomResourceDefinition adds a kind to the API server. Its name must be
// PLURAL.GROUP.
type CustomResourceDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CustomResourceDefinitionSpec   `json:"spec"`
	Status            CustomResourceDefinitionStatus `json:"status,omitempty"`
}

// ResourceScope is Namespaced or Cluster.
type ResourceScope string

// Scopes.
const (
	ClusterScoped   ResourceScope = "Cluster"
	NamespaceScoped ResourceScope = "Namespaced"
)

// CustomResourceDefinitionSpec describes the new kind.
type CustomResourceDefinitionSpec struct {
	Group    string                            `json:"group"`
	Names    CustomResourceDefinitionNames     `json:"names"`
	Scope    ResourceScope                     `json:"scope"`
	Versions []CustomResourceDefinitionVersion `json:"versions"`
	// PreserveUnknownFields must be false (as in apiextensions/v1).
	PreserveUnknownFields bool `json:"preserveUnknownFields,omitempty"`
}

// CustomResourceDefinitionNames are the kind's names.
type CustomResourceDefinitionNames struct {
	Plural     string   `json:"plural"`
	Singular   string   `json:"singular,omitempty"`
	ShortNames []string `json:"shortNames,omitempty"`
	Kind       string   `json:"kind"`
	ListKind   string   `json:"listKind,omitempty"`
	Categories []string `json:"categories,omitempty"`
}

// CustomResourceDefinitionVersion is one served version.
type CustomResourceDefinitionVersion struct {
	Name                     string                           `json:"name"`
	Served                   bool                             `json:"served"`
	Storage                  bool                             `json:"storage"`
	Deprecated               bool                             `json:"deprecated,omitempty"`
	Schema                   *CustomResourceValidation        `json:"schema,omitempty"`
	Subresources             *CustomResourceSubresources      `json:"subresources,omitempty"`
	AdditionalPrinterColumns []CustomResourceColumnDefinition `json:"additionalPrinterColumns,omitempty"`
}

// CustomResourceValidation holds the version's schema.
type CustomResourceValidation struct {
	OpenAPIV3Schema *JSONSchemaProps `json:"openAPIV3Schema,omitempty"`
}

// CustomResourceSubresources says which subresources the kind has.
type CustomResourceSubresources struct {
	Status *CustomResourceSubresourceStatus `json:"status,omitempty"`
}

// CustomResourceSubresourceStatus enables the status subresource.
type CustomResourceSubresourceStatus struct{}

// CustomResourceColumnDefinition is an extra column for `get`.
type CustomResourceColumnDefinition struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

// JSONSchemaProps is the subset of OpenAPI v3 schema that allot enforces.
type JSONSchemaProps struct {
	Type                 string                     `json:"type,omitempty"`
	Format               string                     `json:"format,omitempty"`
	Title                string                     `json:"title,omitempty"`
	Description          string                     `json:"description,omitempty"`
	Properties           map[string]JSONSchemaProps `json:"properties,omitempty"`
	Required             []string                   `json:"required,omitempty"`
	Items                *JSONSchemaProps           `json:"items,omitempty"`
	AdditionalProperties *JSONSchemaPropsOrBool     `json:"additionalProperties,omitempty"`
	Enum                 []runtime.RawExtension     `json:"enum,omitempty"`
	Default              *runtime.RawExtension      `json:"default,omitempty"`
	Minimum              *float64                   `json:"minimum,omitempty"`
	Maximum              *float64                   `json:"maximum,omitempty"`
	ExclusiveMinimum     bool                       `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum     bool                       `json:"exclusiveMaximum,omitempty"`
	MinLength            *int64                     `json:"minLength,omitempty"`
	MaxLength            *int64                     `json:"maxLength,omitempty"`
	Pattern              string                     `json:"pattern,omitempty"`
	MinItems             *int64                     `json:"minItems,omitempty"`
	MaxItems             *int64                     `json:"maxItems,omitempty"`
	UniqueItems          bool                       `json:"uniqueItems,omitempty"`
	MinProperties        *int64                     `json:"minProperties,omitempty"`
	MaxProperties        *int64                     `json:"maxProperties,omitempty"`
	Nullable             bool                       `json:"nullable,omitempty"`
	AllOf                []JSONSchemaProps          `json:"allOf,omitempty"`
	AnyOf                []JSONSchemaProps          `json:"anyOf,omitempty"`
	OneOf                []JSONSchemaProps          `json:"oneOf,omitempty"`
	Not                  *JSONSchemaProps           `json:"not,omitempty"`

	XPreserveUnknownFields *bool `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	XEmbeddedResource      bool  `json:"x-kubernetes-embedded-resource,omitempty"`
	XIntOrString           bool  `json:"x-kubernetes-int-or-string,omitempty"`

	// XListType (atomic, set or map), XListMapKeys (of a map list) and
	// XMapType (granular or atomic) say how server-side apply merges a
	// list or an object, as in Kubernetes.
	XListType    *string  `json:"x-kubernetes-list-type,omitempty"`
	XListMapKeys []string `json:"x-kubernetes-list-map-keys,omitempty"`
	XMapType     *string  `json:"x-kubernetes-map-type,omitempty"`
}

// JSONSchemaPropsOrBool is a schema, or true/false (any / no extra
// properties).
type JSONSchemaPropsOrBool struct {
	Allows bool             `json:"-"`
	Schema *JSONSchemaProps `json:"-"`
}

// CustomResourceDefinitionStatus reports the accepted names and conditions.
type CustomResourceDefinitionStatus struct {
	Conditions     []CustomResourceDefinitionCondition `json:"conditions,omitempty" listType:"map" listMapKey:"type"`
	AcceptedNames  CustomResourceDefinitionNames       `json:"acceptedNames"`
	StoredVersions []string                            `json:"storedVersions,omitempty"`
}

// CustomResourceDefinitionCondition is Established or NamesAccepted.
type CustomResourceDefinitionCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
}

// +kubebuilder:object:root=true

// CustomResourceDefinitionList is a list of CRDs.
type CustomResourceDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CustomResourceDefinition `json:"items"`
}
