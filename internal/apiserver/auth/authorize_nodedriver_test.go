package auth

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// selecting sets the request's field selector.
func (a attrs) selecting(sel string) attrs {
	a.FieldSelector = fields.ParseSelectorOrDie(sel).Requirements()
	return a
}

func TestUserDriverNode(t *testing.T) {
	if d, n := gpuN1.Driver(), gpuN1.Node(); d != "gpu.example.com" || n != "n1" {
		t.Errorf("node-driver Driver(), Node() = %q, %q", d, n)
	}
	if d, n := gpuDrv.Driver(), gpuDrv.Node(); d != "" || n != "" {
		t.Errorf("driver Driver(), Node() = %q, %q, want empty", d, n)
	}
}

func TestNodeDriverSliceSelector(t *testing.T) {
	list := req(gpuN1, "list", resourceSlices).cluster()
	watch := req(gpuN1, "watch", resourceSlices).cluster()
	cases := map[string]authCase{
		"exact terms":             {attrs: list.selecting("spec.driver=gpu.example.com,spec.nodeName=n1"), allowed: true},
		"either order":            {attrs: list.selecting("spec.nodeName=n1,spec.driver=gpu.example.com"), allowed: true},
		"double equals":           {attrs: watch.selecting("spec.driver==gpu.example.com,spec.nodeName==n1"), allowed: true},
		"pools not per node":      {attrs: watch.selecting("spec.driver=gpu.example.com,spec.nodeName="), allowed: true},
		"extra pool term":         {attrs: list.selecting("spec.driver=gpu.example.com,spec.nodeName=,spec.pool.name=p"), allowed: true},
		"no selector":             {attrs: list, reason: "must list resourceslices with fieldSelector spec.driver=gpu.example.com,spec.nodeName=n1"},
		"missing driver term":     {attrs: list.selecting("spec.nodeName=n1")},
		"missing node term":       {attrs: watch.selecting("spec.driver=gpu.example.com"), reason: "must watch"},
		"not-equal driver term":   {attrs: list.selecting("spec.driver!=gpu.example.com,spec.nodeName=n1")},
		"not-equal node term":     {attrs: list.selecting("spec.driver=gpu.example.com,spec.nodeName!=n2")},
		"other driver":            {attrs: list.selecting("spec.driver=fpga.example.com,spec.nodeName=n1")},
		"other node":              {attrs: watch.selecting("spec.driver=gpu.example.com,spec.nodeName=n2")},
		"only pool term":          {attrs: list.selecting("spec.pool.name=n1")},
		"deletecollection":        {attrs: req(gpuN1, "deletecollection", resourceSlices).cluster().selecting("spec.driver=gpu.example.com,spec.nodeName=n1"), reason: "node-drivers get, list and watch"},
		"selector on other kinds": {attrs: req(gpuN1, "list", "pods").selecting("spec.nodeName=n1")},
	}
	runAuthCases(t, cases)
}

var nodeDriverCases = map[string]authCase{
	"get any slice":        {attrs: req(gpuN1, "get", resourceSlices).cluster().named("x"), allowed: true},
	"create own slice":     {attrs: req(gpuN1, "create", resourceSlices).cluster().object(makeResourceSlice("n1", "gpu.example.com")), allowed: true},
	"update own slice":     {attrs: req(gpuN1, "update", resourceSlices).cluster().named("s").object(makeResourceSlice("n1", "gpu.example.com")).oldObject(makeResourceSlice("n1", "gpu.example.com")), allowed: true},
	"delete own slice":     {attrs: req(gpuN1, "delete", resourceSlices).cluster().named("s").oldObject(makeResourceSlice("n1", "gpu.example.com")), allowed: true},
	"slice for all nodes":  {attrs: req(gpuN1, "create", resourceSlices).cluster().object(makeResourceSlice("", "gpu.example.com")), reason: "written by drivers and admins"},
	"slice of other node":  {attrs: req(gpuN1, "create", resourceSlices).cluster().object(makeResourceSlice("n2", "gpu.example.com")), reason: `spec.nodeName "n1", not "n2"`},
	"slice of other drv":   {attrs: req(gpuN1, "create", resourceSlices).cluster().object(makeResourceSlice("n1", "fpga.example.com")), reason: `spec.driver "gpu.example.com", not "fpga.example.com"`},
	"move slice away":      {attrs: req(gpuN1, "update", resourceSlices).cluster().named("s").object(makeResourceSlice("n2", "gpu.example.com")).oldObject(makeResourceSlice("n1", "gpu.example.com"))},
	"take over slice":      {attrs: req(gpuN1, "patch", resourceSlices).cluster().named("s").object(makeResourceSlice("n1", "gpu.example.com")).oldObject(makeResourceSlice("n1", "fpga.example.com"))},
	"delete other's slice": {attrs: req(gpuN1, "delete", resourceSlices).cluster().named("s").oldObject(makeResourceSlice("n2", "gpu.example.com"))},

	"get own node":   {attrs: req(gpuN1, "get", "nodes").named("n1"), allowed: true},
	"get other node": {attrs: req(gpuN1, "get", "nodes").named("n2"), reason: `only get its own Node "n1"`},
	"list nodes":     {attrs: req(gpuN1, "list", "nodes")},

	// Claims: allocated a device of the driver and reserved for a pod on the node.
	"get own claim":                  {attrs: req(gpuN1, "get", claimRes).named("nd-own"), allowed: true},
	"get own v1alpha2 claim":         {attrs: req(gpuN1, "get", claimRes).named("nd-alpha"), allowed: true},
	"get missing claim (404)":        {attrs: req(gpuN1, "get", claimRes).named("nope"), allowed: true, reason: "does not exist"},
	"get claim of other driver":      {attrs: req(gpuN1, "get", claimRes).named("nd-other-driver"), reason: `allocated a device of driver "gpu.example.com"`},
	"get claim of pod on other node": {attrs: req(gpuN1, "get", claimRes).named("nd-other-node"), reason: `reserved for a pod bound to node "n1"`},
	"get unreserved claim":           {attrs: req(gpuN1, "get", claimRes).named("nd-unreserved")},
	"get claim of replaced pod":      {attrs: req(gpuN1, "get", claimRes).named("nd-stale-uid")},
	"get unallocated v1alpha2":       {attrs: req(gpuN1, "get", claimRes).named("gpu-claim")},
	"list claims":                    {attrs: req(gpuN1, "list", claimRes)},
	"watch claims":                   {attrs: req(gpuN1, "watch", claimRes)},
	"get claim status":               {attrs: req(gpuN1, "get", claimStatus).named("nd-own")},

	"own device status": {attrs: req(gpuN1, "update", claimStatus).named("nd-own").
		oldObject(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1")).
		object(withDeviceStatus(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1"), "gpu.example.com")), allowed: true},
	"own device status (lookup)": {attrs: req(gpuN1, "patch", claimStatus).named("nd-own").
		object(withDeviceStatus(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1"), "gpu.example.com")), reason: "only write the status of resource.k8s.io/v1"},
	"other driver's device status": {attrs: req(gpuN1, "update", claimStatus).named("nd-own").
		oldObject(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1")).
		object(withDeviceStatus(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1"), "nic.example.com")), reason: "only change status.devices entries"},
	"status of claim on other node": {attrs: req(gpuN1, "update", claimStatus).named("nd-other-node").
		oldObject(v1ClaimFor("nd-other-node", "gpu.example.com", "p2", "uid-p2")).
		object(withDeviceStatus(v1ClaimFor("nd-other-node", "gpu.example.com", "p2", "uid-p2"), "gpu.example.com")), reason: "reserved for a pod bound"},
	"claim finalizers": {attrs: req(gpuN1, "update", claimRes).named("nd-own").
		oldObject(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1")).object(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1"))},

	"create event":     {attrs: req(gpuN1, "create", "events"), allowed: true},
	"patch event":      {attrs: req(gpuN1, "patch", "events").named("e"), allowed: true},
	"delete event":     {attrs: req(gpuN1, "delete", "events").named("e")},
	"read pods":        {attrs: req(gpuN1, "list", "pods"), reason: "node-drivers get, list and watch"},
	"get pod":          {attrs: req(gpuN1, "get", "pods").named("p1")},
	"get device class": {attrs: req(gpuN1, "get", "deviceclasses.resource.k8s.io").cluster().named("c")},
	"update node":      {attrs: req(gpuN1, "update", "nodes").named("n1").object(makeNode("n1")).oldObject(makeNode("n1"))},
}

func TestAuthorizeNodeDriver(t *testing.T) { runAuthCases(t, nodeDriverCases) }
