package auth

import "testing"

const (
	claimRes       = "resourceclaims.resource.k8s.io"
	claimStatus    = "resourceclaims.resource.k8s.io/status"
	schedCtxStatus = "podschedulingcontexts.resource.k8s.io/status"
	claimParamsRes = "resourceclaimparameters.resource.k8s.io"
	classParamsRes = "resourceclassparameters.resource.k8s.io"
	resourceSlices = "resourceslices.resource.k8s.io"
	taintRules     = "devicetaintrules.resource.k8s.io"
)

var fpgaClaim = makeClaim("fpga-claim", "fpga")

var driverCases = map[string]authCase{
	"read anything":     {attrs: req(gpuDrv, "list", "pods"), allowed: true},
	"read class params": {attrs: req(gpuDrv, "watch", classParamsRes), allowed: true},
	"create event":      {attrs: req(gpuDrv, "create", "events"), allowed: true},

	// v1 ResourceSlices.
	"create own node-local slice":        {attrs: req(gpuDrv, "create", resourceSlices).cluster().object(makeResourceSlice("n1", "gpu.example.com")), allowed: true},
	"create own slice for all nodes":     {attrs: req(gpuDrv, "create", resourceSlices).cluster().object(makeResourceSlice("", "gpu.example.com")), allowed: true},
	"move own slice to all nodes":        {attrs: req(gpuDrv, "update", resourceSlices).cluster().object(makeResourceSlice("", "gpu.example.com")).oldObject(makeResourceSlice("n1", "gpu.example.com")), allowed: true},
	"other driver's slice for all nodes": {attrs: req(gpuDrv, "create", resourceSlices).cluster().object(makeResourceSlice("", "fpga.example.com")), reason: `spec.driver "gpu.example.com", not "fpga.example.com"`},
	"move own slice to other driver":     {attrs: req(gpuDrv, "update", resourceSlices).cluster().object(makeResourceSlice("n1", "fpga.example.com")).oldObject(makeResourceSlice("n1", "gpu.example.com")), reason: `spec.driver "gpu.example.com", not "fpga.example.com"`},
	"delete other driver's slice":        {attrs: req(gpuDrv, "delete", resourceSlices).cluster().oldObject(makeResourceSlice("n1", "fpga.example.com"))},
	"node creates slice for all nodes":   {attrs: req(node1, "create", resourceSlices).cluster().object(makeResourceSlice("", "gpu.example.com")), reason: `spec.nodeName "n1", not ""`},
	"node moves its slice to other node": {attrs: req(node1, "update", resourceSlices).cluster().object(makeResourceSlice("n2", "gpu.example.com")).oldObject(makeResourceSlice("n1", "gpu.example.com"))},

	// DeviceTaintRules: a driver taints its own devices, never another
	// driver's or every device.
	"create rule for own devices":     {attrs: req(gpuDrv, "create", taintRules).cluster().object(makeTaintRule("gpu.example.com")), allowed: true},
	"create rule for other driver":    {attrs: req(gpuDrv, "create", taintRules).cluster().object(makeTaintRule("fpga.example.com")), reason: `spec.deviceSelector.driver "gpu.example.com", not "fpga.example.com"`},
	"create rule for every device":    {attrs: req(gpuDrv, "create", taintRules).cluster().object(makeTaintRule("")), reason: `not ""`},
	"widen own rule to every device":  {attrs: req(gpuDrv, "update", taintRules).cluster().object(makeTaintRule("")).oldObject(makeTaintRule("gpu.example.com"))},
	"delete other driver's rule":      {attrs: req(gpuDrv, "delete", taintRules).cluster().oldObject(makeTaintRule("fpga.example.com"))},
	"rule status is not the driver's": {attrs: req(gpuDrv, "update", taintRules+"/status").cluster().object(makeTaintRule("gpu.example.com")).oldObject(makeTaintRule("gpu.example.com")), reason: "drivers write only"},

	// v1 claims: a driver owns those allocated a device of its own.
	"status of v1 claim with own device": {attrs: req(gpuDrv, "update", claimStatus).named("v1").oldObject(v1ClaimOf("gpu.example.com")).object(v1ClaimOf("gpu.example.com")), allowed: true},
	"status of v1 claim of other driver": {attrs: req(gpuDrv, "update", claimStatus).named("v1").oldObject(v1ClaimOf("fpga.example.com")).object(v1ClaimOf("fpga.example.com")), reason: "allocated a device of driver"},
	"status of unallocated v1 claim":     {attrs: req(gpuDrv, "update", claimStatus).named("v1").oldObject(v1ClaimOf("")).object(v1ClaimOf(""))},
	"own device status of v1 claim": {attrs: req(gpuDrv, "update", claimStatus).named("v1").oldObject(v1ClaimOf("gpu.example.com")).
		object(withDeviceStatus(v1ClaimOf("gpu.example.com"), "gpu.example.com")), allowed: true},
	"other driver's device status of v1 claim": {attrs: req(gpuDrv, "update", claimStatus).named("v1").oldObject(v1ClaimOf("gpu.example.com")).
		object(withDeviceStatus(v1ClaimOf("gpu.example.com"), "nic.example.com")), reason: "only change status.devices entries"},
	"reservations of v1 claim": {attrs: req(gpuDrv, "update", claimStatus).named("v1").oldObject(v1ClaimOf("gpu.example.com")).
		object(withReservation(v1ClaimOf("gpu.example.com"))), reason: "not its allocation, reservations"},
	"finalizer of v1 claim with own device": {attrs: req(gpuDrv, "update", claimRes).named("v1").oldObject(v1ClaimOf("gpu.example.com")).object(v1ClaimOf("gpu.example.com", "f")), allowed: true},

	// Claims.
	"update own claim status":         {attrs: req(gpuDrv, "update", claimStatus).named("gpu-claim").oldObject(gpuClaim.obj()), allowed: true},
	"patch own claim status (lookup)": {attrs: req(gpuDrv, "patch", claimStatus).named("gpu-claim"), allowed: true},
	"add finalizer to own claim":      {attrs: req(gpuDrv, "update", claimRes).named("gpu-claim").oldObject(gpuClaim.obj()).object(gpuClaimFinalized.obj()), allowed: true},
	"remove finalizer from own claim": {attrs: req(gpuDrv, "patch", claimRes).named("gpu-claim").oldObject(gpuClaimFinalized.obj()).object(gpuClaim.allocatedBy("x").obj()), allowed: true},
	"status of claim it allocated":    {attrs: req(gpuDrv, "update", claimStatus).named("orphan-claim"), allowed: true},
	"other driver's claim status":     {attrs: req(gpuDrv, "update", claimStatus).named("fpga-claim").oldObject(fpgaClaim.obj()), reason: `driver "gpu.example.com" may only write resourceclaims of classes with driverName "gpu.example.com"; class "fpga"`},
	"other driver's claim (lookup)":   {attrs: req(gpuDrv, "patch", claimStatus).named("fpga-claim")},
	"other driver's claim finalizer":  {attrs: req(gpuDrv, "update", claimRes).named("fpga-claim").oldObject(fpgaClaim.obj()).object(fpgaClaim.finalizer("x").obj())},
	"change own claim labels":         {attrs: req(gpuDrv, "update", claimRes).named("gpu-claim").oldObject(gpuClaim.obj()).object(gpuClaim.label("a", "b").obj()), reason: "only change metadata.finalizers"},
	"change own claim class":          {attrs: req(gpuDrv, "update", claimRes).named("gpu-claim").oldObject(gpuClaim.obj()).object(makeClaim("gpu-claim", "fpga").obj())},
	"update claim without object":     {attrs: req(gpuDrv, "update", claimRes).named("gpu-claim").oldObject(gpuClaim.obj()), reason: "no object given"},
	"claim with missing class":        {attrs: req(gpuDrv, "update", claimStatus).named("missing").oldObject(makeClaim("missing", "gone").obj()), reason: "not found"},
	"missing claim":                   {attrs: req(gpuDrv, "update", claimStatus).named("nope"), reason: "not found"},
	"create claim denied":             {attrs: req(gpuDrv, "create", claimRes), reason: "drivers write only"},
	"delete own claim denied":         {attrs: req(gpuDrv, "delete", claimRes).named("gpu-claim")},

	// Scheduling contexts.
	"context of pod with own claim":          {attrs: req(gpuDrv, "update", schedCtxStatus).named("p1"), allowed: true},
	"context of pod with generated claim":    {attrs: req(gpuDrv, "patch", schedCtxStatus).named("p3"), allowed: true},
	"context of pod with other driver claim": {attrs: req(gpuDrv, "update", schedCtxStatus).named("p2"), reason: "pod default/p2 has none"},
	"context of pod without generated claim": {attrs: req(gpuDrv, "update", schedCtxStatus).named("p4")},
	"context of missing pod":                 {attrs: req(gpuDrv, "update", schedCtxStatus).named("nope"), reason: "not found"},
	"context spec denied":                    {attrs: req(gpuDrv, "update", "podschedulingcontexts.resource.k8s.io").named("p1")},
	"create context denied":                  {attrs: req(gpuDrv, "create", "podschedulingcontexts.resource.k8s.io")},

	// Parameters.
	"create claim params of own group":    {attrs: req(gpuDrv, "create", claimParamsRes).object(claimParams("gpu.example.com")), allowed: true},
	"create class params of parent group": {attrs: req(gpuDrv, "create", classParamsRes).object(classParams("example.com")), allowed: true},
	"update class params":                 {attrs: req(gpuDrv, "update", classParamsRes).named("params").object(classParams("example.com")).oldObject(classParams("gpu.example.com")), allowed: true},
	"delete claim params":                 {attrs: req(gpuDrv, "delete", claimParamsRes).named("params").oldObject(claimParams("gpu.example.com")), allowed: true},
	"create params of other group":        {attrs: req(gpuDrv, "create", claimParamsRes).object(claimParams("fpga.example.com")), reason: `generatedFrom.apiGroup is "fpga.example.com"`},
	"create params of top-level domain":   {attrs: req(gpuDrv, "create", classParamsRes).object(classParams("com"))},
	"create params of longer group":       {attrs: req(gpuDrv, "create", classParamsRes).object(classParams("x.gpu.example.com"))},
	"create params not generated":         {attrs: req(gpuDrv, "create", classParamsRes).object(classParams("")), reason: `generatedFrom.apiGroup is ""`},
	"take over other driver's params":     {attrs: req(gpuDrv, "update", claimParamsRes).named("params").object(claimParams("gpu.example.com")).oldObject(claimParams("fpga.example.com"))},
	"give params to other driver":         {attrs: req(gpuDrv, "update", classParamsRes).named("params").object(classParams("fpga.example.com")).oldObject(classParams("gpu.example.com"))},
	"delete other driver's params":        {attrs: req(gpuDrv, "delete", classParamsRes).named("params").oldObject(classParams("fpga.example.com"))},
	"update params without old":           {attrs: req(gpuDrv, "update", classParamsRes).named("params").object(classParams("gpu.example.com")), reason: "no object given"},
	"deletecollection params denied":      {attrs: req(gpuDrv, "deletecollection", claimParamsRes)},

	// Everything else.
	"create slice denied":      {attrs: req(gpuDrv, "create", "noderesourceslices.resource.k8s.io").object(makeSlice("s", "n1"))},
	"update pod status denied": {attrs: req(gpuDrv, "update", "pods/status").named("p1")},
	"create class denied":      {attrs: req(gpuDrv, "create", "resourceclasses.resource.k8s.io").object(makeClass("c", "gpu.example.com"))},
	"create custom resource":   {attrs: req(gpuDrv, "create", "cards.gpu.example.com")},
}

func TestAuthorizeDriver(t *testing.T) { runAuthCases(t, driverCases) }

func TestDriverOwnsGroup(t *testing.T) {
	cases := map[string]struct {
		driver, group string
		want          bool
	}{
		"same name":          {"dra.example.com", "dra.example.com", true},
		"parent domain":      {"cards.dra.example.com", "dra.example.com", true},
		"grandparent domain": {"cards.dra.example.com", "example.com", true},
		"sibling":            {"cards.dra.example.com", "nics.dra.example.com", false},
		"child group":        {"dra.example.com", "cards.dra.example.com", false},
		"suffix not label":   {"cards.xdra.example.com", "dra.example.com", false},
		"top-level domain":   {"cards.example.com", "com", false},
		"dotless exact":      {"gpu", "gpu", true},
		"empty group":        {"gpu", "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := driverOwnsGroup(tc.driver, tc.group); got != tc.want {
				t.Errorf("driverOwnsGroup(%q, %q) = %v, want %v", tc.driver, tc.group, got, tc.want)
			}
		})
	}
}
