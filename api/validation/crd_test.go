package validation

import (
	"strings"
	"testing"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type crd = apiextv1.CustomResourceDefinition
type props = apiextv1.JSONSchemaProps

func TestValidateCustomResourceDefinition(t *testing.T) {
	const v0 = "spec.versions[0]"
	for name, tc := range map[string]struct {
		crd  *crd
		want []string
	}{
		"valid":              {crd: makeCRD().obj()},
		"name mismatch":      {crd: makeCRD().with(func(c *crd) { c.Name = "gadgets.example.com" }).obj(), want: []string{`metadata.name: must be spec.names.plural+"."+spec.group ("widgets.example.com")`}},
		"group without dot":  {crd: makeCRD().with(func(c *crd) { c.Spec.Group, c.Name = "example", "widgets.example" }).obj(), want: []string{"spec.group: at least one dot"}},
		"group not a domain": {crd: makeCRD().with(func(c *crd) { c.Spec.Group, c.Name = "Ex_ample.com", "widgets.Ex_ample.com" }).obj(), want: []string{"metadata.name", "spec.group"}},
		"core group":         {crd: makeCRD().with(func(c *crd) { c.Spec.Group, c.Name = "", "widgets." }).obj(), want: []string{"metadata.name", "spec.group: may not be shadowed"}},
		"resource group":     {crd: makeCRD().with(func(c *crd) { c.Spec.Group, c.Name = "resource.k8s.io", "widgets.resource.k8s.io" }).obj(), want: []string{"spec.group: may not be shadowed"}},
		"apiextensions":      {crd: makeCRD().with(func(c *crd) { c.Spec.Group, c.Name = "apiextensions.k8s.io", "widgets.apiextensions.k8s.io" }).obj(), want: []string{"spec.group: may not be shadowed"}},
		"plural uppercase":   {crd: makeCRD().with(func(c *crd) { c.Spec.Names.Plural, c.Name = "Widgets", "Widgets.example.com" }).obj(), want: []string{"metadata.name", "spec.names.plural"}},
		"singular dots":      {crd: makeCRD().with(func(c *crd) { c.Spec.Names.Singular = "wid.get" }).obj(), want: []string{"spec.names.singular"}},
		"kind lowercase":     {crd: makeCRD().with(func(c *crd) { c.Spec.Names.Kind = "widget" }).obj(), want: []string{"spec.names.kind: CamelCase"}},
		"kind missing":       {crd: makeCRD().with(func(c *crd) { c.Spec.Names.Kind = "" }).obj(), want: []string{"spec.names.kind: Required"}},
		"listKind = kind":    {crd: makeCRD().with(func(c *crd) { c.Spec.Names.ListKind = "Widget" }).obj(), want: []string{"spec.names.listKind: must differ"}},
		"short name twice":   {crd: makeCRD().with(func(c *crd) { c.Spec.Names.ShortNames = []string{"wd", "wd"} }).obj(), want: []string{"spec.names.shortNames[1]: Duplicate"}},
		"scope missing":      {crd: makeCRD().with(func(c *crd) { c.Spec.Scope = "" }).obj(), want: []string{"spec.scope: Required"}},
		"scope bad":          {crd: makeCRD().with(func(c *crd) { c.Spec.Scope = "Global" }).obj(), want: []string{"spec.scope: Unsupported"}},
		"cluster scope":      {crd: makeCRD().with(func(c *crd) { c.Spec.Scope = apiextv1.ClusterScoped }).obj()},
		"preserve unknown":   {crd: makeCRD().with(func(c *crd) { c.Spec.PreserveUnknownFields = true }).obj(), want: []string{"spec.preserveUnknownFields: must be false"}},
		"no versions":        {crd: makeCRD().with(func(c *crd) { c.Spec.Versions = nil }).obj(), want: []string{"spec.versions: Required"}},
		"no storage":         {crd: makeCRD().with(func(c *crd) { c.Spec.Versions[0].Storage = false }).obj(), want: []string{"spec.versions: exactly one version marked as storage"}},
		"two storage":        {crd: makeCRD().with(addVersion("v2", true)).obj(), want: []string{"spec.versions: exactly one version"}},
		"second version":     {crd: makeCRD().with(addVersion("v2", false)).obj()},
		"version twice":      {crd: makeCRD().with(addVersion("v1", false)).obj(), want: []string{"spec.versions[1].name: Duplicate"}},
		"version name bad":   {crd: makeCRD().with(func(c *crd) { c.Spec.Versions[0].Name = "V1.0" }).obj(), want: []string{v0 + ".name"}},
		"served no schema":   {crd: makeCRD().with(func(c *crd) { c.Spec.Versions[0].Schema = nil }).obj(), want: []string{v0 + ".schema.openAPIV3Schema: a served version needs a schema"}},
		"unserved no schema": {crd: makeCRD().with(func(c *crd) { c.Spec.Versions[0].Schema, c.Spec.Versions[0].Served = nil, false }).obj()},
		"printer column": {crd: makeCRD().with(func(c *crd) {
			c.Spec.Versions[0].AdditionalPrinterColumns = []apiextv1.CustomResourceColumnDefinition{{Name: "Size", Type: "size"}}
		}).obj(), want: []string{v0 + ".additionalPrinterColumns[0].jsonPath: Required", v0 + ".additionalPrinterColumns[0].type: Unsupported"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateCustomResourceDefinition(tc.crd), tc.want...) })
	}
}

func addVersion(name string, storage bool) func(*crd) {
	return func(c *crd) {
		v := *c.Spec.Versions[0].DeepCopy()
		v.Name, v.Storage = name, storage
		c.Spec.Versions = append(c.Spec.Versions, v)
	}
}

// listMap is an array of items keyed by keys (x-kubernetes-list-type map).
func listMap(items props, keys ...string) props {
	return props{Type: "array", Items: &items, XListType: ptr("map"), XListMapKeys: keys}
}

func TestValidateCRDSchema(t *testing.T) {
	const root = "spec.versions[0].schema.openAPIV3Schema"
	const spec = root + ".properties[spec]"
	prop := func(name string, p props) func(*props) {
		return func(s *props) {
			sp := s.Properties["spec"]
			sp.Properties[name] = p
			s.Properties["spec"] = sp
		}
	}
	for name, tc := range map[string]struct {
		mutate func(*props)
		want   []string
	}{
		"root not object":              {mutate: func(s *props) { s.Type = "array"; s.Items = &props{Type: "string"} }, want: []string{root + ".type: must be object at the root", root + ".properties: only allowed for type object"}},
		"unknown type":                 {mutate: prop("x", props{Type: "date"}), want: []string{spec + ".properties[x].type: Unsupported"}},
		"missing type":                 {mutate: prop("x", props{}), want: []string{spec + ".properties[x].type: Required"}},
		"int-or-string":                {mutate: prop("x", props{XIntOrString: true})},
		"int-or-string typed":          {mutate: prop("x", props{XIntOrString: true, Type: "string"}), want: []string{spec + ".properties[x].type: must be empty"}},
		"preserve untyped":             {mutate: prop("x", props{XPreserveUnknownFields: ptr(true)})},
		"array without items":          {mutate: prop("x", props{Type: "array"}), want: []string{spec + ".properties[x].items: Required"}},
		"items on string":              {mutate: prop("x", props{Type: "string", Items: &props{Type: "string"}}), want: []string{spec + ".properties[x].items: only allowed for type array"}},
		"properties on string":         {mutate: prop("x", props{Type: "string", Properties: map[string]props{"a": {Type: "string"}}}), want: []string{spec + ".properties[x].properties: only allowed for type object"}},
		"additional and props":         {mutate: prop("x", props{Type: "object", Properties: map[string]props{"a": {Type: "string"}}, AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &props{Type: "string"}}}), want: []string{spec + ".properties[x].additionalProperties: together with properties"}},
		"map of strings":               {mutate: prop("x", props{Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &props{Type: "string"}}})},
		"nested bad type":              {mutate: prop("x", props{Type: "array", Items: &props{Type: "list"}}), want: []string{spec + ".properties[x].items.type"}},
		"pattern ok":                   {mutate: prop("x", props{Type: "string", Pattern: `^[a-z]+$`})},
		"pattern bad":                  {mutate: prop("x", props{Type: "string", Pattern: `([a-z]`}), want: []string{spec + ".properties[x].pattern: valid regular expression"}},
		"bounds inverted":              {mutate: prop("x", props{Type: "string", MinLength: ptr(int64(3)), MaxLength: ptr(int64(2))}), want: []string{spec + ".properties[x].minLength: must not be greater than maxLength"}},
		"negative maxItems":            {mutate: prop("x", props{Type: "array", Items: &props{Type: "string"}, MaxItems: ptr(int64(-1))}), want: []string{spec + ".properties[x].maxItems"}},
		"junctor without types":        {mutate: prop("x", props{Type: "string", AnyOf: []props{{Pattern: "^a"}, {Pattern: "^b"}}})},
		"default matches":              {mutate: prop("x", props{Type: "integer", Default: raw(`3`)})},
		"default wrong type":           {mutate: prop("x", props{Type: "integer", Default: raw(`"three"`)}), want: []string{spec + ".properties[x].default: must be of type integer"}},
		"default uses nested defaults": {mutate: prop("x", props{Type: "object", Required: []string{"a"}, Default: raw(`{}`), Properties: map[string]props{"a": {Type: "integer", Default: raw(`1`)}}})},
		"default in junctor":           {mutate: prop("x", props{Type: "integer", AllOf: []props{{Default: raw(`1`)}}}), want: []string{spec + ".properties[x].allOf[0].default: may not be set inside"}},
		"enum not json":                {mutate: prop("x", props{Type: "string", Enum: []runtime.RawExtension{*raw(`{`)}}), want: []string{spec + ".properties[x].enum[0]"}},
		"list map":                     {mutate: prop("x", listMap(props{Type: "object", Required: []string{"name"}, Properties: map[string]props{"name": {Type: "string"}}}, "name"))},
		"list map defaulted key":       {mutate: prop("x", listMap(props{Type: "object", Properties: map[string]props{"port": {Type: "integer", Default: raw(`80`)}}}, "port"))},
		"list map no keys":             {mutate: prop("x", listMap(props{Type: "object"})), want: []string{spec + ".properties[x].x-kubernetes-list-map-keys: Required"}},
		"list map key not required":    {mutate: prop("x", listMap(props{Type: "object", Properties: map[string]props{"name": {Type: "string"}}}, "name")), want: []string{spec + ".properties[x].x-kubernetes-list-map-keys[0]: Invalid value: \"name\": must be required or have a default"}},
		"list map key missing":         {mutate: prop("x", listMap(props{Type: "object", Properties: map[string]props{}}, "name")), want: []string{spec + ".properties[x].x-kubernetes-list-map-keys[0]: Invalid value: \"name\": must be a property"}},
		"list map of strings":          {mutate: prop("x", listMap(props{Type: "string"}, "name")), want: []string{spec + ".properties[x].x-kubernetes-list-type: Invalid value: \"map\": items of a map list must be objects"}},
		"list type on object":          {mutate: prop("x", props{Type: "object", XListType: ptr("atomic")}), want: []string{spec + ".properties[x].x-kubernetes-list-type: Invalid value: \"atomic\": must only be used if type is array"}},
		"list type unknown":            {mutate: prop("x", props{Type: "array", Items: &props{Type: "string"}, XListType: ptr("bag")}), want: []string{spec + ".properties[x].x-kubernetes-list-type: Unsupported value"}},
		"set of objects":               {mutate: prop("x", props{Type: "array", Items: &props{Type: "object"}, XListType: ptr("set")}), want: []string{spec + ".properties[x].x-kubernetes-list-type: Invalid value: \"set\": items of a set must be scalars"}},
		"keys without map":             {mutate: prop("x", props{Type: "array", Items: &props{Type: "string"}, XListMapKeys: []string{"a"}}), want: []string{spec + ".properties[x].x-kubernetes-list-map-keys: Forbidden"}},
		"map type atomic":              {mutate: prop("x", props{Type: "object", XMapType: ptr("atomic")})},
		"map type on array":            {mutate: prop("x", props{Type: "array", Items: &props{Type: "string"}, XMapType: ptr("granular")}), want: []string{spec + ".properties[x].x-kubernetes-map-type: Invalid value: \"granular\": must only be used if type is object"}},
	} {
		t.Run(name, func(t *testing.T) {
			expectErrs(t, ValidateCustomResourceDefinition(makeCRD().schema(tc.mutate).obj()), tc.want...)
		})
	}
}

func TestValidateCRDSchemaDepth(t *testing.T) {
	nest := func(levels int) *props {
		leaf := props{Type: "string"}
		for i := 1; i < levels; i++ {
			leaf = props{Type: "object", Properties: map[string]props{"a": leaf}}
		}
		return &leaf
	}
	at := func(levels int) string {
		return "spec.versions[0].schema.openAPIV3Schema" + strings.Repeat(".properties[a]", levels-1)
	}
	ok := makeCRD().with(func(c *crd) { c.Spec.Versions[0].Schema.OpenAPIV3Schema = nest(SchemaMaxDepth) }).obj()
	expectErrs(t, ValidateCustomResourceDefinition(ok))
	deep := makeCRD().with(func(c *crd) { c.Spec.Versions[0].Schema.OpenAPIV3Schema = nest(SchemaMaxDepth + 1) }).obj()
	expectErrs(t, ValidateCustomResourceDefinition(deep), at(SchemaMaxDepth+1)+": at most 128 levels")
}

func TestValidateCRDUpdates(t *testing.T) {
	old := makeCRD().obj()
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"add version":    {errs: ValidateCustomResourceDefinitionUpdate(makeCRD().with(addVersion("v2", false)).obj(), old)},
		"change group":   {errs: ValidateCustomResourceDefinitionUpdate(makeCRD().with(func(c *crd) { c.Spec.Group = "example.org" }).obj(), old), want: []string{"metadata.name", "spec.group: field is immutable"}},
		"change plural":  {errs: ValidateCustomResourceDefinitionUpdate(makeCRD().with(func(c *crd) { c.Spec.Names.Plural = "gadgets" }).obj(), old), want: []string{"metadata.name", "spec.names.plural: field is immutable"}},
		"change scope":   {errs: ValidateCustomResourceDefinitionUpdate(makeCRD().with(func(c *crd) { c.Spec.Scope = apiextv1.ClusterScoped }).obj(), old), want: []string{"spec.scope: field is immutable"}},
		"status ok":      {errs: ValidateCustomResourceDefinitionStatusUpdate(makeCRD().with(crdCondition("Established", "True")).obj(), old)},
		"status bad":     {errs: ValidateCustomResourceDefinitionStatusUpdate(makeCRD().with(crdCondition("Established", "Yes")).obj(), old), want: []string{"status.conditions[0].status"}},
		"stored version": {errs: ValidateCustomResourceDefinitionStatusUpdate(makeCRD().with(func(c *crd) { c.Status.StoredVersions = []string{"V1"} }).obj(), old), want: []string{"status.storedVersions[0]"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}

func crdCondition(typ, status string) func(*crd) {
	return func(c *crd) {
		c.Status.Conditions = append(c.Status.Conditions, apiextv1.CustomResourceDefinitionCondition{Type: typ, Status: status})
	}
}

func TestDefaultCustomResourceDefinition(t *testing.T) {
	c := makeCRD().obj()
	DefaultCustomResourceDefinition(c)
	if c.Spec.Names.ListKind != "WidgetList" || c.Spec.Names.Singular != "widget" {
		t.Errorf("defaults = %q, %q; want WidgetList, widget", c.Spec.Names.ListKind, c.Spec.Names.Singular)
	}
	expectErrs(t, ValidateCustomResourceDefinition(c))
}
