package validation

import (
	"errors"
	"strings"
	"testing"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fakeCompiler accepts selectors without "!!" and panics on "panic".
func fakeCompiler(expr string) error {
	if strings.Contains(expr, "panic") {
		panic("boom")
	}
	if strings.Contains(expr, "!!") {
		return errors.New("syntax error at '!!'")
	}
	return nil
}

func makeClaimParameters(f func(*resourcev1alpha2.ResourceClaimParameters)) *resourcev1alpha2.ResourceClaimParameters {
	p := &resourcev1alpha2.ResourceClaimParameters{
		ObjectMeta:    objMeta("params", "default"),
		GeneratedFrom: &resourcev1alpha2.ResourceClaimParametersReference{APIGroup: "dra.example.com", Kind: "CardParameters", Name: "my"},
		Requests: []resourcev1alpha2.ResourceRequest{{
			DriverName: "cards.example.com",
			ResourceRequestModel: resourcev1alpha2.ResourceRequestModel{Partitionable: &resourcev1alpha2.PartitionableResourceRequests{
				Required: []resourcev1alpha2.PartitionableResourceRequest{{Name: "gpu-0", Selector: `quantities["memory"] >= "8Gi"`}},
			}},
		}},
	}
	f(p)
	return p
}

func TestValidateResourceClaimParameters(t *testing.T) {
	type params = resourcev1alpha2.ResourceClaimParameters
	const req0 = "requests[0].partitionable.required[0]"
	opts := Options{CompileSelector: fakeCompiler}
	for name, tc := range map[string]struct {
		mutate func(*params)
		want   []string
	}{
		"valid":              {mutate: func(*params) {}},
		"no requests":        {mutate: func(p *params) { p.Requests = nil }},
		"no generatedFrom":   {mutate: func(p *params) { p.GeneratedFrom = nil }},
		"generatedFrom kind": {mutate: func(p *params) { p.GeneratedFrom.Kind = "" }, want: []string{"generatedFrom.kind: Required"}},
		"generatedFrom name": {mutate: func(p *params) { p.GeneratedFrom.Name = "" }, want: []string{"generatedFrom.name: Required"}},
		"no driver":          {mutate: func(p *params) { p.Requests[0].DriverName = "" }, want: []string{"requests[0].driverName: Required"}},
		"no model":           {mutate: func(p *params) { p.Requests[0].Partitionable = nil }, want: []string{"requests[0]: must specify one of: `partitionable`"}},
		"nothing required":   {mutate: func(p *params) { p.Requests[0].Partitionable.Required = nil }, want: []string{"requests[0].partitionable.required: Required"}},
		"empty selector":     {mutate: func(p *params) { p.Requests[0].Partitionable.Required[0].Selector = "" }, want: []string{req0 + ".selector: Required"}},
		"bad selector":       {mutate: func(p *params) { p.Requests[0].Partitionable.Required[0].Selector = "a !! b" }, want: []string{req0 + ".selector: does not compile: syntax error at '!!'"}},
		"panicking compiler": {mutate: func(p *params) { p.Requests[0].Partitionable.Required[0].Selector = "panic" }, want: []string{req0 + ".selector: Internal error"}},
		"request name twice": {mutate: func(p *params) { r := &p.Requests[0].Partitionable.Required; *r = append(*r, (*r)[0]) }, want: []string{"requests[0].partitionable.required[1].name: Duplicate"}},
	} {
		t.Run(name, func(t *testing.T) {
			expectErrs(t, ValidateResourceClaimParametersWith(makeClaimParameters(tc.mutate), opts), tc.want...)
		})
	}
}

func TestSetSelectorCompiler(t *testing.T) {
	bad := makeClaimParameters(func(p *resourcev1alpha2.ResourceClaimParameters) {
		p.Requests[0].Partitionable.Required[0].Selector = "a !! b"
	})
	const path = "requests[0].partitionable.required[0].selector"
	expectErrs(t, ValidateResourceClaimParameters(bad))
	SetSelectorCompiler(fakeCompiler)
	defer SetSelectorCompiler(nil)
	expectErrs(t, ValidateResourceClaimParameters(bad), path)
	expectErrs(t, Validate(bad), path)
	expectErrs(t, ValidateResourceClaimParametersWith(bad, Options{CompileSelector: func(string) error { return nil }}))
}

func TestValidateResourceClassParameters(t *testing.T) {
	type params = resourcev1alpha2.ResourceClassParameters
	make := func(f func(*params)) *params {
		p := &params{
			ObjectMeta:    objMeta("class-params", ""),
			GeneratedFrom: &resourcev1alpha2.ResourceClassParametersReference{Kind: "CardClassParameters", Name: "gpu", Namespace: "drivers"},
			Filters: []resourcev1alpha2.ResourceFilter{{
				DriverName:          "cards.example.com",
				ResourceFilterModel: resourcev1alpha2.ResourceFilterModel{Partitionable: &resourcev1alpha2.PartitionableResourceFilter{Selector: `quantities["memory"] <= "16Gi"`}},
			}},
		}
		f(p)
		return p
	}
	opts := Options{CompileSelector: fakeCompiler}
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"valid":             {errs: ValidateResourceClassParametersWith(make(func(*params) {}), opts)},
		"generated no kind": {errs: ValidateResourceClassParametersWith(make(func(p *params) { p.GeneratedFrom.Kind = "" }), opts), want: []string{"generatedFrom.kind: Required"}},
		"generated bad ns":  {errs: ValidateResourceClassParametersWith(make(func(p *params) { p.GeneratedFrom.Namespace = "a.b" }), opts), want: []string{"generatedFrom.namespace"}},
		"no driver":         {errs: ValidateResourceClassParametersWith(make(func(p *params) { p.Filters[0].DriverName = "" }), opts), want: []string{"filters[0].driverName: Required"}},
		"no model":          {errs: ValidateResourceClassParametersWith(make(func(p *params) { p.Filters[0].Partitionable = nil }), opts), want: []string{"filters[0]: must specify one of: `partitionable`"}},
		"empty selector":    {errs: ValidateResourceClassParametersWith(make(func(p *params) { p.Filters[0].Partitionable.Selector = "" }), opts), want: []string{"filters[0].partitionable.selector: Required"}},
		"bad selector":      {errs: ValidateResourceClassParametersWith(make(func(p *params) { p.Filters[0].Partitionable.Selector = "!!" }), opts), want: []string{"filters[0].partitionable.selector: does not compile"}},
		"update":            {errs: ValidateResourceClassParametersUpdate(make(func(p *params) { p.Filters = nil }), make(func(*params) {}))},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}
