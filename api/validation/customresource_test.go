package validation

import (
	"encoding/json"
	"reflect"
	"testing"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// widgetSchema has one property of each kind under spec.
func widgetSchema() *props {
	return &props{Type: "object", Properties: map[string]props{"spec": {
		Type:     "object",
		Required: []string{"size"},
		Properties: map[string]props{
			"size":     {Type: "integer", Minimum: ptr(1.0), Maximum: ptr(10.0)},
			"ratio":    {Type: "number", Maximum: ptr(1.0), ExclusiveMaximum: true},
			"name":     {Type: "string", MinLength: ptr(int64(2)), MaxLength: ptr(int64(5)), Pattern: "^[a-z]+$"},
			"mode":     {Type: "string", Enum: []runtime.RawExtension{*raw(`"Fast"`), *raw(`"Slow"`)}},
			"tags":     {Type: "array", MaxItems: ptr(int64(2)), UniqueItems: true, Items: &props{Type: "string"}},
			"labels":   {Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &props{Type: "string"}}},
			"note":     {Type: "string", Nullable: true},
			"extra":    {Type: "object", XPreserveUnknownFields: ptr(true)},
			"port":     {XIntOrString: true},
			"enabled":  {Type: "boolean"},
			"shape":    {Type: "object", Properties: map[string]props{"w": {Type: "integer"}, "h": {Type: "integer"}}, OneOf: []props{{Required: []string{"w"}}, {Required: []string{"h"}}}},
			"level":    {Type: "integer", AnyOf: []props{{Minimum: ptr(100.0)}, {Maximum: ptr(0.0)}}},
			"code":     {Type: "string", AllOf: []props{{MinLength: ptr(int64(2))}, {Pattern: "^x"}}, Not: &props{Pattern: "^xx"}},
			"anything": {XPreserveUnknownFields: ptr(true)},
		},
	}}}
}

func widget(spec map[string]interface{}) map[string]interface{} {
	return map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w1", "namespace": "default", "labels": map[string]interface{}{"app": "x"}},
		"spec":     spec,
	}
}

func TestValidateCustomResource(t *testing.T) {
	type obj = map[string]interface{}
	for name, tc := range map[string]struct {
		spec obj
		want []string
	}{
		"minimal":             {spec: obj{"size": int64(3)}},
		"size as float":       {spec: obj{"size": float64(3)}},
		"size as json number": {spec: obj{"size": json.Number("3")}},
		"size as int":         {spec: obj{"size": 3}},
		"size fractional":     {spec: obj{"size": 2.5}, want: []string{"spec.size: must be of type integer"}},
		"size missing":        {spec: obj{}, want: []string{"spec.size: Required"}},
		"size as string":      {spec: obj{"size": "3"}, want: []string{"spec.size: must be of type integer"}},
		"size below minimum":  {spec: obj{"size": int64(0)}, want: []string{"spec.size: must be greater than or equal to 1"}},
		"size above maximum":  {spec: obj{"size": json.Number("11")}, want: []string{"spec.size: must be less than or equal to 10"}},
		"number from int":     {spec: obj{"size": int64(1), "ratio": int64(0)}},
		"exclusive maximum":   {spec: obj{"size": int64(1), "ratio": 1.0}, want: []string{"spec.ratio: must be less than 1"}},
		"string ok":           {spec: obj{"size": int64(1), "name": "abc"}},
		"string short":        {spec: obj{"size": int64(1), "name": "a"}, want: []string{"spec.name: at least 2 characters"}},
		"string long":         {spec: obj{"size": int64(1), "name": "abcdef"}, want: []string{"spec.name: Too long"}},
		"string pattern":      {spec: obj{"size": int64(1), "name": "AB"}, want: []string{"spec.name: must match the pattern"}},
		"enum ok":             {spec: obj{"size": int64(1), "mode": "Fast"}},
		"enum bad":            {spec: obj{"size": int64(1), "mode": "Medium"}, want: []string{`spec.mode: supported values: "Fast", "Slow"`}},
		"array ok":            {spec: obj{"size": int64(1), "tags": []interface{}{"a", "b"}}},
		"array too long":      {spec: obj{"size": int64(1), "tags": []interface{}{"a", "b", "c"}}, want: []string{"spec.tags: must have at most 2 items"}},
		"array duplicate":     {spec: obj{"size": int64(1), "tags": []interface{}{"a", "a"}}, want: []string{"spec.tags[1]: Duplicate"}},
		"array item type":     {spec: obj{"size": int64(1), "tags": []interface{}{"a", int64(1)}}, want: []string{"spec.tags[1]: must be of type string"}},
		"map values":          {spec: obj{"size": int64(1), "labels": obj{"a": "b"}}},
		"map value type":      {spec: obj{"size": int64(1), "labels": obj{"a": true}}, want: []string{"spec.labels.a: must be of type string"}},
		"null nullable":       {spec: obj{"size": int64(1), "note": nil}},
		"null not nullable":   {spec: obj{"size": nil}, want: []string{"spec.size: must not be null"}},
		"preserve unknown":    {spec: obj{"size": int64(1), "extra": obj{"anything": obj{"x": int64(1)}}}},
		"untyped preserve":    {spec: obj{"size": int64(1), "anything": []interface{}{int64(1), "x"}}},
		"int or string":       {spec: obj{"size": int64(1), "port": "http"}},
		"int or string int":   {spec: obj{"size": int64(1), "port": int64(80)}},
		"int or string bool":  {spec: obj{"size": int64(1), "port": true}, want: []string{"spec.port: must be an integer or a string"}},
		"boolean":             {spec: obj{"size": int64(1), "enabled": "yes"}, want: []string{"spec.enabled: must be of type boolean"}},
		"unknown field":       {spec: obj{"size": int64(1), "colour": "red"}, want: []string{"spec.colour: unknown field"}},
		"unknown nested":      {spec: obj{"size": int64(1), "shape": obj{"w": int64(1), "d": int64(2)}}, want: []string{"spec.shape.d: unknown field"}},
		"oneOf one":           {spec: obj{"size": int64(1), "shape": obj{"w": int64(1)}}},
		"oneOf both":          {spec: obj{"size": int64(1), "shape": obj{"w": int64(1), "h": int64(1)}}, want: []string{"spec.shape: matches more than one"}},
		"oneOf none":          {spec: obj{"size": int64(1), "shape": obj{}}, want: []string{"spec.shape: matches none"}},
		"anyOf high":          {spec: obj{"size": int64(1), "level": int64(100)}},
		"anyOf low":           {spec: obj{"size": int64(1), "level": int64(-5)}},
		"anyOf none":          {spec: obj{"size": int64(1), "level": int64(50)}, want: []string{"spec.level: at least one of the schemas in anyOf"}},
		"allOf and not ok":    {spec: obj{"size": int64(1), "code": "xa"}},
		"allOf fails":         {spec: obj{"size": int64(1), "code": "ab"}, want: []string{"spec.code: must match the pattern"}},
		"not fails":           {spec: obj{"size": int64(1), "code": "xx"}, want: []string{"spec.code: must not match the schema in not"}},
		"spec wrong type":     {spec: nil, want: []string{"spec: must not be null"}},
	} {
		t.Run(name, func(t *testing.T) {
			o := widget(tc.spec)
			if tc.spec == nil {
				o["spec"] = nil
			}
			expectErrs(t, ValidateCustomResource(widgetSchema(), o), tc.want...)
		})
	}
}

func TestValidateCustomResourceRoot(t *testing.T) {
	type obj = map[string]interface{}
	spec := obj{"size": int64(1)}
	for name, tc := range map[string]struct {
		mutate func(obj)
		want   []string
	}{
		"meta fields allowed": {mutate: func(obj) {}},
		"unknown root field":  {mutate: func(o obj) { o["status"] = obj{} }, want: []string{"status: unknown field"}},
		"no apiVersion":       {mutate: func(o obj) { delete(o, "apiVersion") }, want: []string{"apiVersion: Required"}},
		"kind not string":     {mutate: func(o obj) { o["kind"] = int64(1) }, want: []string{"kind: Required"}},
		"no name":             {mutate: func(o obj) { delete(o["metadata"].(obj), "name") }, want: []string{"metadata.name: Required"}},
		"bad name":            {mutate: func(o obj) { o["metadata"].(obj)["name"] = "W 1" }, want: []string{"metadata.name"}},
		"bad label":           {mutate: func(o obj) { o["metadata"].(obj)["labels"] = obj{"a": "b c"} }, want: []string{"metadata.labels"}},
		"metadata not object": {mutate: func(o obj) { o["metadata"] = "x" }, want: []string{"metadata: must be an object"}},
		"metadata unknown":    {mutate: func(o obj) { o["metadata"].(obj)["owner"] = "x" }, want: []string{`metadata: unknown field "owner"`}},
	} {
		t.Run(name, func(t *testing.T) {
			o := widget(spec)
			tc.mutate(o)
			expectErrs(t, ValidateCustomResource(widgetSchema(), o), tc.want...)
		})
	}
	expectErrs(t, ValidateCustomResource(nil, widget(obj{"anything": true})))
	rootRules := widgetSchema()
	rootRules.OneOf = []props{{Required: []string{"spec"}}, {Required: []string{"data"}}}
	rootRules.MaxProperties = ptr(int64(0))
	rootRules.Required = []string{"apiVersion", "kind", "metadata"}
	withData := widget(spec)
	withData["data"] = "x"
	expectErrs(t, ValidateCustomResource(rootRules, withData), "data: unknown field", "<root>: matches more than one", "<root>: must have at most 0 items")
	old := widget(spec)
	renamed := widget(spec)
	renamed["metadata"].(obj)["name"] = "w2"
	expectErrs(t, ValidateCustomResourceUpdate(widgetSchema(), renamed, old), "metadata.name: field is immutable")
}

func TestDefaultCustomResource(t *testing.T) {
	type obj = map[string]interface{}
	schema := &props{Type: "object", Properties: map[string]props{
		"metadata": {Type: "object", Default: raw(`{"name":"never"}`)},
		"spec": {Type: "object", Default: raw(`{}`), Properties: map[string]props{
			"replicas": {Type: "integer", Default: raw(`1`)},
			"mode":     {Type: "string", Default: raw(`"Fast"`)},
			"note":     {Type: "string", Nullable: true, Default: raw(`"n"`)},
			"ports": {Type: "array", Items: &props{Type: "object", Properties: map[string]props{
				"protocol": {Type: "string", Default: raw(`"TCP"`)},
			}}},
			"limits": {Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &props{
				Type: "object", Properties: map[string]props{"max": {Type: "integer", Default: raw(`10`)}},
			}}},
		}},
	}}
	for name, tc := range map[string]struct {
		in, want obj
	}{
		"whole spec from default": {
			in:   obj{"metadata": obj{"name": "a"}},
			want: obj{"metadata": obj{"name": "a"}, "spec": obj{"replicas": int64(1), "mode": "Fast", "note": "n"}},
		},
		"kept values": {
			in:   obj{"spec": obj{"replicas": int64(3), "mode": "Slow", "note": nil}},
			want: obj{"spec": obj{"replicas": int64(3), "mode": "Slow", "note": nil}},
		},
		"null replaced": {
			in:   obj{"spec": obj{"replicas": nil}},
			want: obj{"spec": obj{"replicas": int64(1), "mode": "Fast", "note": "n"}},
		},
		"into items and maps": {
			in: obj{"spec": obj{"ports": []interface{}{obj{}, obj{"protocol": "UDP"}}, "limits": obj{"gpu": obj{}}}},
			want: obj{"spec": obj{"replicas": int64(1), "mode": "Fast", "note": "n",
				"ports": []interface{}{obj{"protocol": "TCP"}, obj{"protocol": "UDP"}}, "limits": obj{"gpu": obj{"max": int64(10)}}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			DefaultCustomResource(schema, tc.in)
			if !reflect.DeepEqual(tc.in, tc.want) {
				t.Errorf("defaulted =\n%#v\nwant\n%#v", tc.in, tc.want)
			}
		})
	}
	DefaultCustomResource(nil, obj{})
}
