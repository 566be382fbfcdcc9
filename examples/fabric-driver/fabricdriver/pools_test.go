package fabricdriver

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDefaultPools(t *testing.T) {
	p, err := LoadPools("")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pool := range p.Pools {
		names = append(names, pool.Name+"/"+pool.Model)
	}
	if got := strings.Join(names, ","); got != "rack-1/fpga-a,rack-2/fpga-a,zone-a/gpu-b" {
		t.Errorf("built-in pools %s", got)
	}
}

func TestPoolsErrors(t *testing.T) {
	tests := map[string]struct{ doc, want string }{
		"no pools":        {`pools: []`, "at least one pool"},
		"unknown field":   {`pools: [{name: a, model: m, capacity: 1, nodeSelector: {r: "1"}, colour: red}]`, `unknown field "colour"`},
		"bad name":        {`pools: [{name: A_B, model: m, capacity: 1, nodeSelector: {r: "1"}}]`, `pools[0].name "A_B"`},
		"duplicate":       {`pools: [{name: a, model: m, capacity: 1, nodeSelector: {r: "1"}}, {name: a, model: m, capacity: 1, nodeSelector: {r: "1"}}]`, `pools[1].name "a": duplicate`},
		"no model":        {`pools: [{name: a, capacity: 1, nodeSelector: {r: "1"}}]`, "pools[0].model"},
		"zero capacity":   {`pools: [{name: a, model: m, capacity: 0, nodeSelector: {r: "1"}}]`, "pools[0].capacity 0: must be between 1 and 1024"},
		"huge capacity":   {`pools: [{name: a, model: m, capacity: 5000, nodeSelector: {r: "1"}}]`, "pools[0].capacity 5000"},
		"no selector":     {`pools: [{name: a, model: m, capacity: 1}]`, "pools[0].nodeSelector: at least one label"},
		"bad label key":   {`pools: [{name: a, model: m, capacity: 1, nodeSelector: {"a b": "1"}}]`, `pools[0].nodeSelector key "a b"`},
		"bad label value": {`pools: [{name: a, model: m, capacity: 1, nodeSelector: {r: "-x-"}}]`, `pools[0].nodeSelector[r] "-x-"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePools([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParsePools = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := LoadPools(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "read pools") {
		t.Errorf("LoadPools(missing) = %v", err)
	}
}

func TestPoolHelpers(t *testing.T) {
	p := Pool{Name: "r", Model: "m", Capacity: 2, NodeSelector: map[string]string{"rack": "1", "zone": "a"}}
	if !p.Reachable(map[string]string{"rack": "1", "zone": "a", "x": "y"}) || p.Reachable(map[string]string{"rack": "1"}) {
		t.Error("Reachable: a node needs every label of the selector")
	}
	if !p.HasUnit("r-1") || p.HasUnit("r-2") || p.HasUnit("q-0") {
		t.Error("HasUnit: wrong answers")
	}
	sel := p.AvailableOnNodes()
	if reqs := sel.NodeSelectorTerms[0].MatchExpressions; len(reqs) != 2 || reqs[0].Key != "rack" || reqs[1].Key != "zone" {
		t.Errorf("AvailableOnNodes = %+v, want one term with rack and zone", sel)
	}
	if !sel.Matches("n", map[string]string{"rack": "1", "zone": "a"}) || sel.Matches("n", map[string]string{"rack": "1"}) {
		t.Error("AvailableOnNodes does not select the nodes Reachable accepts")
	}
}

func TestPickPool(t *testing.T) {
	pools := []Pool{
		{Name: "a", Model: "m", Capacity: 4, NodeSelector: map[string]string{"rack": "1"}},
		{Name: "b", Model: "m", Capacity: 4, NodeSelector: map[string]string{"rack": "2"}},
		{Name: "c", Model: "n", Capacity: 4, NodeSelector: map[string]string{"rack": "1"}},
	}
	rack1 := map[string]string{"rack": "1"}
	tests := map[string]struct {
		p     ClaimParameters
		reach bool
		free  map[string]int
		want  string // "" for none
	}{
		"most free":          {ClaimParameters{Count: 1}, false, map[string]int{"a": 1, "b": 3, "c": 2}, "b"},
		"first on a tie":     {ClaimParameters{Count: 1}, false, map[string]int{"a": 2, "b": 2, "c": 2}, "a"},
		"model":              {ClaimParameters{Count: 1, Model: "n"}, false, map[string]int{"a": 4, "b": 4, "c": 1}, "c"},
		"reachable only":     {ClaimParameters{Count: 1, Model: "m"}, true, map[string]int{"a": 1, "b": 4, "c": 4}, "a"},
		"count":              {ClaimParameters{Count: 3}, true, map[string]int{"a": 2, "b": 4, "c": 3}, "c"},
		"nothing big enough": {ClaimParameters{Count: 3}, true, map[string]int{"a": 2, "b": 4, "c": 2}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := pickPool(pools, &tc.p, rack1, tc.reach, tc.free)
			if (tc.want == "" && ok) || (tc.want != "" && got.Name != tc.want) {
				t.Errorf("pickPool = %s (%v), want %q", got.Name, ok, tc.want)
			}
		})
	}
}

func TestParseClaimParameters(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		o := map[string]any{"apiVersion": Group + "/" + Version, "kind": Kind}
		if spec != nil {
			o["spec"] = spec
		}
		return &unstructured.Unstructured{Object: o}
	}
	tests := map[string]struct {
		spec    map[string]any
		want    ClaimParameters
		wantErr string
	}{
		"no spec":        {nil, ClaimParameters{Count: 1}, ""},
		"all set":        {map[string]any{"count": int64(3), "model": "m", "optional": true}, ClaimParameters{Count: 3, Model: "m", Optional: true}, ""},
		"count zero":     {map[string]any{"count": int64(0)}, ClaimParameters{}, "spec.count 0"},
		"count too big":  {map[string]any{"count": int64(17)}, ClaimParameters{}, "spec.count 17"},
		"count a string": {map[string]any{"count": "2"}, ClaimParameters{}, "spec.count 2: must be an integer"},
		"model a number": {map[string]any{"model": int64(2)}, ClaimParameters{}, "spec.model"},
		"optional text":  {map[string]any{"optional": "yes"}, ClaimParameters{}, "spec.optional"},
		"unknown field":  {map[string]any{"colour": "red"}, ClaimParameters{}, "spec.colour: unknown field"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseClaimParameters(obj(tc.spec))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || *got != tc.want {
				t.Fatalf("ParseClaimParameters = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestHandle(t *testing.T) {
	h := Handle{Pool: "p", Model: "m", Units: []string{"p-0", "p-1"}}
	got, err := DecodeHandle(h.Encode())
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if got, err := DecodeHandle(Handle{Fallback: true}.Encode()); err != nil || !got.Fallback {
		t.Fatalf("fallback round trip: %+v, %v", got, err)
	}
	for data, want := range map[string]string{
		"":                                  "resourceHandle: empty",
		"{":                                 "resourceHandle: not a fabric.example.com handle",
		`{"pool":"p"}`:                      "pool and units are required",
		`{"fallback":true,"units":["p-0"]}`: "a fallback has no pool and no units",
	} {
		if _, err := DecodeHandle(data); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeHandle(%q) = %v, want an error containing %q", data, err, want)
		}
	}
}
