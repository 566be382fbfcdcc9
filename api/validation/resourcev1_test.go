package validation

import (
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func equalObjects(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }

// TestV1FeatureTable pins the table of gates to Kubernetes 1.37's defaults
// and to what allot implements.
func TestV1FeatureTable(t *testing.T) {
	type state struct {
		gate              string
		kubernetes, allot bool
	}
	want := map[V1Feature]state{
		V1FeaturePrioritizedList:          {"DRAPrioritizedList", true, true},
		V1FeatureAdminAccess:              {"DRAAdminAccess", true, true},
		V1FeaturePartitionableDevices:     {"DRAPartitionableDevices", true, true},
		V1FeatureDeviceTaints:             {"DRADeviceTaints", true, true},
		V1FeatureDeviceTaintNoExecute:     {"DRADeviceTaints", true, true},
		V1FeatureDeviceTaintRules:         {"DRADeviceTaintRules", true, true},
		V1FeatureDistinctAttribute:        {"DRAConsumableCapacity", true, true},
		V1FeatureConsumableCapacity:       {"DRAConsumableCapacity", true, true},
		V1FeatureBindingConditions:        {"DRADeviceBindingConditions", true, true},
		V1FeatureDeviceStatus:             {"DRAResourceClaimDeviceStatus", true, true},
		V1FeatureExtendedResource:         {"DRAExtendedResource", true, true},
		V1FeatureListTypeAttributes:       {"DRAListTypeAttributes", false, false},
		V1FeatureDerivedAttributes:        {"DRADerivedAttributes", false, false},
		V1FeatureCompatibilityGroups:      {"DRADeviceCompatibilityGroups", false, false},
		V1FeatureOptionalNodeOperations:   {"DRAOptionalNodeOperations", false, false},
		V1FeatureNodeAllocatableResources: {"DRANodeAllocatableResources", false, false},
		V1FeaturePartitionTypeAttribute:   {"DRAPartitionableDevicesType", false, false},
	}
	if len(V1Features) != len(want) {
		t.Errorf("V1Features has %d rows, want %d", len(V1Features), len(want))
	}
	for f, w := range want {
		got, ok := V1Features[f]
		if !ok {
			t.Errorf("%s: no row", f)
			continue
		}
		if got.Gate != w.gate || got.Kubernetes != w.kubernetes || got.Allot != w.allot || got.Fields == "" {
			t.Errorf("%s: got %+v, want %+v", f, got, w)
		}
		if V1FeatureEnabled(f) != (w.kubernetes && w.allot) {
			t.Errorf("%s: V1FeatureEnabled = %v", f, V1FeatureEnabled(f))
		}
	}
	if V1FeatureEnabled("DRANoSuchGate") {
		t.Errorf("an unknown feature is not enabled")
	}
	for f, msg := range map[V1Feature]string{
		V1FeatureListTypeAttributes: "feature gate DRAListTypeAttributes is disabled (as in Kubernetes 1.37)",
		V1FeatureBindingConditions:  "",
		V1FeatureExtendedResource:   "",
		V1FeatureAdminAccess:        "",
	} {
		if got := v1FeatureRefusal(f); got != msg {
			t.Errorf("%s: refusal %q, want %q", f, got, msg)
		}
	}
	// Issue 28's promise: nothing Kubernetes 1.37 turns on by default is
	// refused as not supported.
	for f, st := range V1Features {
		if st.Kubernetes && !st.Allot {
			t.Errorf("%s: on by default in Kubernetes 1.37 but not supported by allot", f)
		}
	}
	// The refusal of a row that is on in Kubernetes but not in allot.
	saved := V1Features[V1FeatureBindingConditions]
	off := saved
	off.Allot = false
	V1Features[V1FeatureBindingConditions] = off
	t.Cleanup(func() { V1Features[V1FeatureBindingConditions] = saved })
	if got := v1FeatureRefusal(V1FeatureBindingConditions); got != "not supported by allot yet" {
		t.Errorf("a row on in Kubernetes and off in allot: refusal %q, want %q", got, "not supported by allot yet")
	}
}

// TestV1FeatureFlip shows that turning a feature on is a change of its
// row: the same slice is refused, then accepted.
func TestV1FeatureFlip(t *testing.T) {
	s := v1Slice(device0(setAttr("models", resourcev1.DeviceAttribute{StringValues: []string{"a", "b"}})))
	expectErrs(t, ValidateResourceSlice(s), "spec.devices[0].attributes[models].strings: "+gateOff("DRAListTypeAttributes"))
	withV1Features(t, V1FeatureListTypeAttributes)
	expectErrs(t, ValidateResourceSlice(s))

	// NoExecute is accepted; turned off, it is refused naming the field.
	r := v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "NoExecute" })
	expectErrs(t, ValidateDeviceTaintRule(r))
	savedNoExec := V1Features[V1FeatureDeviceTaintNoExecute]
	noExecOff := savedNoExec
	noExecOff.Allot = false
	V1Features[V1FeatureDeviceTaintNoExecute] = noExecOff
	expectErrs(t, ValidateDeviceTaintRule(r), "spec.taint.effect: "+notInAllot)
	V1Features[V1FeatureDeviceTaintNoExecute] = savedNoExec

	saved := V1Features[V1FeatureDeviceTaintRules]
	off := saved
	off.Allot = false
	V1Features[V1FeatureDeviceTaintRules] = off
	t.Cleanup(func() { V1Features[V1FeatureDeviceTaintRules] = saved })
	expectErrs(t, ValidateDeviceTaintRule(v1TaintRule(nil)), "spec: "+notInAllot)
}

func TestV1Dispatch(t *testing.T) {
	noName := func(m *metav1.ObjectMeta) { m.Name = "" }
	slice := v1Slice(func(s *resourcev1.ResourceSlice) { noName(&s.ObjectMeta) })
	class := v1Class(func(c *resourcev1.DeviceClass) { noName(&c.ObjectMeta) })
	rule := v1TaintRule(func(r *resourcev1.DeviceTaintRule) { noName(&r.ObjectMeta) })
	claim := v1Claim(func(c *resourcev1.ResourceClaim) { noName(&c.ObjectMeta) })
	tmpl := v1Template(func(t *resourcev1.ResourceClaimTemplate) { noName(&t.ObjectMeta) })
	for name, obj := range map[string]runtime.Object{"DeviceClass": class, "ResourceSlice": slice, "DeviceTaintRule": rule, "ResourceClaim": claim, "ResourceClaimTemplate": tmpl} {
		t.Run(name, func(t *testing.T) {
			expectErrs(t, Validate(obj), "metadata.name: Required")
			expectErrs(t, ValidateUpdate(obj, obj.DeepCopyObject()), "metadata.name: Required")
		})
	}
	for _, obj := range []runtime.Object{claim, rule} {
		expectErrs(t, ValidateStatusUpdate(obj, obj.DeepCopyObject()), "metadata.name: Required")
	}
	for _, obj := range []runtime.Object{class, slice, tmpl} {
		expectErrs(t, ValidateStatusUpdate(obj, obj.DeepCopyObject()), "status: Not found")
	}
	expectErrs(t, ValidateUpdate(claim, tmpl), "kind: may not change the kind")

	Default(claim)
	Default(tmpl)
	if claim.Spec.Devices.Requests[0].Exactly.AllocationMode == "" || tmpl.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode == "" {
		t.Errorf("Default did not reach the v1 claim kinds")
	}
}

func v1Class(f func(*resourcev1.DeviceClass)) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{
		ObjectMeta: objMeta("gpu.example.com", ""),
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{celSelector(`device.driver == "gpu.example.com"`)},
			Config:    []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: opaque("gpu.example.com", `{"kind":"GpuConfig"}`)}},
		},
	}
	if f != nil {
		f(c)
	}
	return c
}

func TestValidateDeviceClass(t *testing.T) {
	SetDeviceSelectorCompiler(fakeCompiler)
	t.Cleanup(func() { SetDeviceSelectorCompiler(nil) })
	for name, tc := range map[string]struct {
		class *resourcev1.DeviceClass
		want  []string
	}{
		"valid":              {class: v1Class(nil)},
		"empty spec":         {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec = resourcev1.DeviceClassSpec{} })},
		"name is subdomain":  {class: v1Class(func(c *resourcev1.DeviceClass) { c.Name = "GPU" }), want: []string{"metadata.name: Invalid value"}},
		"namespaced name ok": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Name = "a.b.c" })},
		// "Each selector must be satisfied"; "DeviceSelector must have
		// exactly one field set."; expressions at most 10 Ki; at most 32.
		"selector without cel":  {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0].CEL = nil }), want: []string{"spec.selectors[0].cel: Required value"}},
		"empty expression":      {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0].CEL.Expression = "" }), want: []string{"spec.selectors[0].cel.expression: Required value"}},
		"does not compile":      {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0].CEL.Expression = "device !!" }), want: []string{"spec.selectors[0].cel.expression: Invalid value"}},
		"expression over 10 Ki": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0].CEL.Expression = strings.Repeat("x", 10*1024+1) }), want: []string{"spec.selectors[0].cel.expression: Too long"}},
		"33 selectors": {class: v1Class(func(c *resourcev1.DeviceClass) {
			for range 32 {
				c.Spec.Selectors = append(c.Spec.Selectors, celSelector("!!"))
			}
		}), want: []string{"spec.selectors: Too many: 33: must have at most 32 items"}},
		// Config: "DeviceConfiguration must have exactly one field set";
		// opaque driver and parameters.
		"config without opaque":  {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Config[0].Opaque = nil }), want: []string{"spec.config[0].opaque: Required value"}},
		"config driver invalid":  {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Config[0].Opaque.Driver = "gpu_example" }), want: []string{"spec.config[0].opaque.driver: Invalid value"}},
		"config params not JSON": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Config[0].Opaque.Parameters.Raw = []byte(`{`) }), want: []string{"spec.config[0].opaque.parameters: Invalid value"}},
		"config params from Object": {class: v1Class(func(c *resourcev1.DeviceClass) {
			c.Spec.Config[0].Opaque.Parameters = runtime.RawExtension{Object: &metav1.Status{Status: "x"}}
		})},
		"33 configs": {class: v1Class(func(c *resourcev1.DeviceClass) {
			for range 32 {
				c.Spec.Config = append(c.Spec.Config, c.Spec.Config[0])
			}
		}), want: []string{"spec.config: Too many: 33: must have at most 32 items"}},
		"extendedResourceName": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr("example.com/gpu") })},
		"extendedResourceName without domain": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr("gpu") }),
			want: []string{"spec.extendedResourceName: Invalid value"}},
		"extendedResourceName in kubernetes.io": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr("kubernetes.io/gpu") }),
			want: []string{"spec.extendedResourceName: Invalid value"}},
		"extendedResourceName with the class prefix": {class: v1Class(func(c *resourcev1.DeviceClass) {
			c.Spec.ExtendedResourceName = ptr("deviceclass.resource.kubernetes.io/gpu")
		}), want: []string{"spec.extendedResourceName: Invalid value"}},
		"extendedResourceName requests.": {class: v1Class(func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr("requests.example.com/gpu") }),
			want: []string{"spec.extendedResourceName: Invalid value"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateDeviceClass(tc.class), tc.want...) })
	}

	// CELSelectorExpressionMaxCost: "Validation against this limit [...]
	// happens only when setting an expression for the first time or when
	// changing it."
	stored := v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0].CEL.Expression = "old !!" })
	expectErrs(t, ValidateDeviceClassUpdate(v1Class(func(c *resourcev1.DeviceClass) {
		c.Spec.Selectors[0].CEL.Expression = "old !!"
		c.Labels = map[string]string{"a": "b"}
	}), stored))
	expectErrs(t, ValidateDeviceClassUpdate(v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0].CEL.Expression = "new !!" }), stored),
		"spec.selectors[0].cel.expression: Invalid value")
	expectErrs(t, ValidateDeviceClassUpdate(v1Class(func(c *resourcev1.DeviceClass) { c.Spec.Selectors = nil }), v1Class(nil)))
	// extendedResourceName is mutable.
	withERN := v1Class(func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr("example.com/gpu") })
	expectErrs(t, ValidateDeviceClassUpdate(withERN, withERN.DeepCopy()))
	expectErrs(t, ValidateDeviceClassUpdate(withERN, v1Class(nil)))
}

func v1TaintRule(f func(*resourcev1.DeviceTaintRule)) *resourcev1.DeviceTaintRule {
	r := &resourcev1.DeviceTaintRule{
		ObjectMeta: objMeta("gpu-0-broken", ""),
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr("gpu.example.com"), Pool: ptr("node-1"), Device: ptr("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/unhealthy", Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	if f != nil {
		f(r)
	}
	return r
}

func TestValidateDeviceTaintRule(t *testing.T) {
	for name, tc := range map[string]struct {
		rule *resourcev1.DeviceTaintRule
		want []string
	}{
		"valid":                {rule: v1TaintRule(nil)},
		"no selector":          {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.DeviceSelector = nil })},
		"empty selector":       {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.DeviceSelector = &resourcev1.DeviceTaintSelector{} })},
		"effect None":          {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "None" })},
		"name not subdomain":   {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Name = "Broken" }), want: []string{"metadata.name: Invalid value"}},
		"driver invalid":       {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.DeviceSelector.Driver = ptr("gpu_example") }), want: []string{"spec.deviceSelector.driver: Invalid value"}},
		"driver empty":         {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.DeviceSelector.Driver = ptr("") }), want: []string{"spec.deviceSelector.driver: Required value"}},
		"pool invalid":         {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.DeviceSelector.Pool = ptr("a//b") }), want: []string{"spec.deviceSelector.pool: Invalid value"}},
		"device invalid":       {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.DeviceSelector.Device = ptr("gpu.0") }), want: []string{"spec.deviceSelector.device: Invalid value"}},
		"taint without key":    {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Key = "" }), want: []string{"spec.taint.key: Required value"}},
		"taint value invalid":  {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Value = strings.Repeat("v", 64) }), want: []string{"spec.taint.value: Invalid value"}},
		"taint without effect": {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "" }), want: []string{"spec.taint.effect: Required value"}},
		"taint unknown effect": {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "Evict" }), want: []string{"spec.taint.effect: Unsupported value"}},
		"taint NoExecute":      {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "NoExecute" })},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateDeviceTaintRule(tc.rule), tc.want...) })
	}

	old := v1TaintRule(nil)
	expectErrs(t, ValidateDeviceTaintRuleUpdate(v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "None"; r.Spec.DeviceSelector = nil }), old))
	expectErrs(t, ValidateDeviceTaintRuleUpdate(v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "NoExecute" }), old))
	expectErrs(t, ValidateDeviceTaintRuleUpdate(v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Key = "" }), old), "spec.taint.key: Required value")
	expectErrs(t, ValidateDeviceTaintRuleUpdate(v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Name = "other" }), old), "metadata.name: Invalid value")
	// "Validation must be prepared to allow unknown enums in stored objects".
	future := v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Spec.Taint.Effect = "Future" })
	expectErrs(t, ValidateDeviceTaintRuleUpdate(v1TaintRule(func(r *resourcev1.DeviceTaintRule) {
		r.Spec.Taint.Effect = "Future"
		r.Labels = map[string]string{"a": "b"}
	}), future))
}

func TestValidateDeviceTaintRuleStatusUpdate(t *testing.T) {
	withConditions := func(conds ...metav1.Condition) *resourcev1.DeviceTaintRule {
		return v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Status.Conditions = conds })
	}
	eight := make([]metav1.Condition, 0, 9)
	for i := range 8 {
		eight = append(eight, condition(fmt.Sprintf("C%d", i)))
	}
	old := v1TaintRule(nil)
	for name, tc := range map[string]struct {
		rule *resourcev1.DeviceTaintRule
		want []string
	}{
		"no conditions":      {rule: old.DeepCopy()},
		"EvictionInProgress": {rule: withConditions(condition(resourcev1.DeviceTaintConditionEvictionInProgress))},
		// "Must have 8 or fewer entries."
		"8 conditions":           {rule: withConditions(eight...)},
		"9 conditions":           {rule: withConditions(append(eight, condition("C8"))...), want: []string{"status.conditions: Too many: 9: must have at most 8 items"}},
		"duplicate type":         {rule: withConditions(condition("A"), condition("A")), want: []string{"status.conditions[1]: Duplicate value"}},
		"condition without type": {rule: withConditions(condition("")), want: []string{"status.conditions[0].type: Required value"}},
		"condition type invalid": {rule: withConditions(condition("a b")), want: []string{"status.conditions[0].type: Invalid value"}},
		"condition bad status": {rule: withConditions(metav1.Condition{Type: "A", Status: "Maybe", Reason: "R", LastTransitionTime: metav1.Now()}),
			want: []string{"status.conditions[0].status: Unsupported value"}},
		"name changes": {rule: v1TaintRule(func(r *resourcev1.DeviceTaintRule) { r.Name = "other" }), want: []string{"metadata.name: Invalid value"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateDeviceTaintRuleStatusUpdate(tc.rule, old), tc.want...) })
	}
}

// exampleDriverSlice is a ResourceSlice as the upstream DRA example driver
// (kubernetes-sigs/dra-example-driver) publishes it: eight GPUs of one
// node with attributes index, uuid, model and driverVersion and capacity
// memory.
func exampleDriverSlice() string {
	var b strings.Builder
	b.WriteString(`apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: kind-worker-gpu.example.com-7bq2x
spec:
  driver: gpu.example.com
  nodeName: kind-worker
  pool:
    name: kind-worker
    generation: 1
    resourceSliceCount: 1
  devices:
`)
	for i := range 8 {
		fmt.Fprintf(&b, `  - name: gpu-%d
    attributes:
      index:
        int: %d
      uuid:
        string: gpu-18db0e85-99e9-c746-8531-ffeb8632%04x
      model:
        string: LATEST-GPU-MODEL
      driverVersion:
        version: 1.0.0
    capacity:
      memory:
        value: 80Gi
`, i, i, i)
	}
	return b.String()
}

const exampleDriverClass = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.example.com'"
`

const exampleDriverTemplate = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test1
  name: single-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel:
              expression: "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'"
      config:
      - requests: ["gpu"]
        opaque:
          driver: gpu.example.com
          parameters:
            apiVersion: gpu.resource.example.com/v1alpha1
            kind: GpuConfig
            sharing:
              strategy: TimeSlicing
              timeSlicingConfig:
                interval: Long
`

// TestV1ExampleDriver checks that what the upstream example driver and its
// demo manifests use validates cleanly, decoded from YAML as a client sends
// it.
func TestV1ExampleDriver(t *testing.T) {
	SetDeviceSelectorCompiler(fakeCompiler)
	t.Cleanup(func() { SetDeviceSelectorCompiler(nil) })
	var slice resourcev1.ResourceSlice
	var class resourcev1.DeviceClass
	var tmpl resourcev1.ResourceClaimTemplate
	for doc, obj := range map[string]any{exampleDriverSlice(): &slice, exampleDriverClass: &class, exampleDriverTemplate: &tmpl} {
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("decode: %v", err)
		}
	}
	if len(slice.Spec.Devices) != 8 || len(tmpl.Spec.Spec.Devices.Config[0].Opaque.Parameters.Raw) == 0 {
		t.Fatalf("fixtures did not decode as expected: %d devices", len(slice.Spec.Devices))
	}
	expectErrs(t, ValidateResourceSlice(&slice))
	expectErrs(t, ValidateDeviceClass(&class))
	expectErrs(t, ValidateResourceClaimTemplateV1(&tmpl))

	// A claim made from the template, allocated one GPU and reserved for
	// a pod.
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "pod0-gpu-x7k2p", Namespace: "gpu-test1", Labels: tmpl.Spec.Labels}, Spec: tmpl.Spec.Spec}
	expectErrs(t, ValidateResourceClaimV1(claim))
	Default(claim)
	allocated := claim.DeepCopy()
	allocated.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "kind-worker", Device: "gpu-3"}},
		Config: []resourcev1.DeviceAllocationConfiguration{
			{Source: resourcev1.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: tmpl.Spec.Spec.Devices.Config[0].DeviceConfiguration},
		},
	}}
	allocated.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod0", UID: "7f6c2a0e-1b1b-4c3e-9d51-1f0e5d3c2b10"}}
	expectErrs(t, ValidateResourceClaimV1StatusUpdate(allocated, claim))

	// Validation leaves its input alone.
	before := slice.DeepCopy()
	ValidateResourceSliceUpdate(&slice, before)
	if !equalObjects(before, &slice) {
		t.Errorf("validation changed the slice")
	}
}

// TestV1OddInputDoesNotPanic runs objects full of empty and missing parts,
// as a strict decode can produce them, through every v1 entry point.
func TestV1OddInputDoesNotPanic(t *testing.T) {
	SetDeviceSelectorCompiler(fakeCompiler)
	t.Cleanup(func() { SetDeviceSelectorCompiler(nil) })
	docs := []string{
		`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","spec":{"perDeviceNodeSelection":true,"nodeSelector":{"nodeSelectorTerms":[{}]},
		  "partitionTypeAttribute":"a/b","sharedCounters":[{},{"counters":{"":{}}}],
		  "devices":[{},{"nodeSelector":{},"consumesCounters":[{}],"taints":[{}],"attributes":{"":{},"a":{"ints":[]}},
		    "allowMultipleAllocations":true,"capacity":{"x":{"value":"1","requestPolicy":{"validRange":{},"validValues":[]}},
		    "y":{"value":"1","requestPolicy":{"default":"1","validRange":{"min":"1","step":"0"}}}},
		    "nodeAllocatableResources":{"cpu":{"mapping":{},"overhead":{}}}}]}}`,
		`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","spec":{"devices":{"requests":[{},{"exactly":{"selectors":[{}],"capacity":{},"derivedAttributes":[{}],"tolerations":[{}]}},
		  {"firstAvailable":[{},{"selectors":[{"cel":{}}]}]}],"constraints":[{},{"requests":["","a/b/c","/"]}],"config":[{},{"opaque":{}}]}},
		  "status":{"allocation":{"nodeSelector":{},"devices":{"results":[{},{"shareID":"x","consumedCapacity":{"":"1"}}],"config":[{}]}},
		  "reservedFor":[{},{}],"devices":[{},{"shareID":"","data":{},"networkData":{}}]}}`,
		`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","spec":{"metadata":{"name":"x","ownerReferences":[{}]},"spec":{"devices":{"requests":[{"exactly":{}}]}}}}`,
		`{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","spec":{"selectors":[{},{"cel":{}}],"config":[{},{"opaque":{"parameters":null}}],"extendedResourceName":""}}`,
		`{"apiVersion":"resource.k8s.io/v1","kind":"DeviceTaintRule","spec":{"deviceSelector":{"driver":"","pool":"","device":""},"taint":{}},"status":{"conditions":[{}]}}`,
	}
	fresh := []func() runtime.Object{
		func() runtime.Object { return &resourcev1.ResourceSlice{} },
		func() runtime.Object { return &resourcev1.ResourceClaim{} },
		func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
		func() runtime.Object { return &resourcev1.DeviceClass{} },
		func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
	}
	for i, doc := range docs {
		obj := fresh[i]()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if len(Validate(obj)) == 0 {
			t.Errorf("doc %d: no errors", i)
		}
		for _, pair := range [][2]runtime.Object{{obj, obj.DeepCopyObject()}, {obj, fresh[i]()}, {fresh[i](), obj}, {fresh[i](), fresh[i]()}} {
			render(ValidateUpdate(pair[0], pair[1]))
			render(ValidateStatusUpdate(pair[0], pair[1]))
		}
		Default(obj)
		render(Validate(obj))
	}
}
