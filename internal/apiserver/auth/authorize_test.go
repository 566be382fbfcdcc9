package auth

import (
	"context"
	"strings"
	"testing"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

var (
	root   = User{Name: "root", Role: RoleAdmin}
	alice  = User{Name: "alice", Role: RoleUser}
	sched  = User{Name: SchedulerName, Role: RoleScheduler}
	cm     = User{Name: ControllerManagerName, Role: RoleControllerManager}
	node1  = User{Name: "n1", Role: RoleNode}
	gpuDrv = User{Name: "gpu.example.com", Role: RoleDriver}
	gpuN1  = User{Name: "gpu.example.com@n1", Role: RoleNodeDriver}
)

// authCase is one authorization request and its expected decision. reason,
// if set, must appear in the decision's reason.
type authCase struct {
	attrs   attrs
	allowed bool
	reason  string
}

// testLookup holds: class "gpu" of gpu.example.com, class "fpga" of
// fpga.example.com; claims gpu-claim, fpga-claim, orphan-claim (class gone,
// allocated by gpu.example.com) and p-gpu (generated for pod p3); pods p1
// (n1, gpu-claim), p2 (n2, fpga-claim), p3 (n1, template claim p-gpu) and
// p4 (template claim not yet generated). For node-drivers: v1 claims
// nd-own (gpu.example.com, reserved for p1 on n1), nd-other-driver
// (fpga.example.com, p1), nd-other-node (gpu.example.com, p2 on n2),
// nd-unreserved, nd-stale-uid (p1 with another UID), and v1alpha2 claim
// nd-alpha (allocated by gpu.example.com, reserved for p1).
func testLookup() *fakeLookup {
	return newFakeLookup().
		withClass(makeClass("gpu", "gpu.example.com")).
		withClass(makeClass("fpga", "fpga.example.com")).
		withClaim(makeClaim("gpu-claim", "gpu").obj()).
		withClaim(makeClaim("fpga-claim", "fpga").obj()).
		withClaim(makeClaim("orphan-claim", "gone").allocatedBy("gpu.example.com").obj()).
		withClaim(makeClaim("p-gpu", "gpu").obj()).
		withPod(makePod("p1").node("n1").claim("gpu", "gpu-claim").obj()).
		withPod(makePod("p2").node("n2").claim("fpga", "fpga-claim").obj()).
		withPod(makePod("p3").node("n1").templateClaim("gpu", "gpu-template", "p-gpu").obj()).
		withPod(makePod("p4").templateClaim("gpu", "gpu-template", "").obj()).
		withV1Claim(v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1")).
		withV1Claim(v1ClaimFor("nd-other-driver", "fpga.example.com", "p1", "uid-p1")).
		withV1Claim(v1ClaimFor("nd-other-node", "gpu.example.com", "p2", "uid-p2")).
		withV1Claim(v1ClaimFor("nd-unreserved", "gpu.example.com", "", "")).
		withV1Claim(v1ClaimFor("nd-stale-uid", "gpu.example.com", "p1", "old-uid")).
		withClaim(makeClaim("nd-alpha", "gpu").allocatedBy("gpu.example.com").reservedFor("p1", "uid-p1").obj())
}

func runAuthCases(t *testing.T, cases map[string]authCase) {
	t.Helper()
	lk := testLookup()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Authorize(context.Background(), Attributes(tc.attrs), lk)
			if d.Allowed != tc.allowed {
				t.Fatalf("Allowed = %v, want %v (reason: %s)", d.Allowed, tc.allowed, d.Reason)
			}
			if d.Reason == "" {
				t.Errorf("empty reason")
			}
			if tc.reason != "" && !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, tc.reason)
			}
		})
	}
}

var generalCases = map[string]authCase{
	"anonymous denied":           {attrs: req(User{}, "get", "pods"), reason: "anonymous"},
	"unknown role denied":        {attrs: req(User{Name: "x", Role: "root"}, "get", "pods"), reason: `unknown role "root"`},
	"admin creates crd":          {attrs: req(root, "create", "customresourcedefinitions.apiextensions.k8s.io"), allowed: true},
	"admin deletes node":         {attrs: req(root, "delete", "nodes").named("n1"), allowed: true},
	"admin writes claim status":  {attrs: req(root, "update", "resourceclaims.resource.k8s.io/status").named("gpu-claim"), allowed: true},
	"admin writes class params":  {attrs: req(root, "create", "resourceclassparameters.resource.k8s.io"), allowed: true},
	"admin unknown verb allowed": {attrs: req(root, "escalate", "pods"), allowed: true},
}

func TestAuthorizeGeneral(t *testing.T) { runAuthCases(t, generalCases) }

var userCases = map[string]authCase{
	"get nodes":                          {attrs: req(alice, "get", "nodes").named("n1"), allowed: true},
	"list slices":                        {attrs: req(alice, "list", "noderesourceslices.resource.k8s.io"), allowed: true},
	"watch class params":                 {attrs: req(alice, "watch", "resourceclassparameters.resource.k8s.io"), allowed: true},
	"get pod log":                        {attrs: req(alice, "get", "pods/log").named("p1"), allowed: true},
	"create pod":                         {attrs: req(alice, "create", "pods").object(makePod("p").obj()), allowed: true},
	"create pod in other namespace":      {attrs: req(alice, "create", "pods").inNS("team-b").object(makePod("p").obj()), allowed: true},
	"delete pod":                         {attrs: req(alice, "delete", "pods").named("p1"), allowed: true},
	"deletecollection pods":              {attrs: req(alice, "deletecollection", "pods"), allowed: true},
	"create event":                       {attrs: req(alice, "create", "events"), allowed: true},
	"create claim":                       {attrs: req(alice, "create", "resourceclaims.resource.k8s.io").object(gpuClaim.obj()), allowed: true},
	"relabel protected claim":            {attrs: req(alice, "update", "resourceclaims.resource.k8s.io").named("gpu-claim").oldObject(gpuClaimFinalized.obj()).object(gpuClaimFinalized.label("a", "b").obj()), allowed: true},
	"create protected claim denied":      {attrs: req(alice, "create", "resourceclaims.resource.k8s.io").object(gpuClaimFinalized.obj()), reason: resourcev1alpha2.DeleteProtectionFinalizer},
	"add claim finalizer denied":         {attrs: req(alice, "update", "resourceclaims.resource.k8s.io").named("gpu-claim").oldObject(gpuClaim.obj()).object(gpuClaimFinalized.obj()), reason: resourcev1alpha2.DeleteProtectionFinalizer},
	"remove claim finalizer denied":      {attrs: req(alice, "patch", "resourceclaims.resource.k8s.io").named("gpu-claim").oldObject(gpuClaimFinalized.obj()).object(gpuClaim.obj()), reason: resourcev1alpha2.DeleteProtectionFinalizer},
	"create generated claim denied":      {attrs: req(alice, "create", "resourceclaims.resource.k8s.io").object(gpuClaim.annotation(resourcev1alpha2.PodClaimNameAnnotation, "gpu").obj()), reason: resourcev1alpha2.PodClaimNameAnnotation},
	"delete protected claim":             {attrs: req(alice, "delete", "resourceclaims.resource.k8s.io").named("gpu-claim"), allowed: true},
	"update claim template":              {attrs: req(alice, "update", "resourceclaimtemplates.resource.k8s.io").named("t"), allowed: true},
	"create claim params":                {attrs: req(alice, "create", "resourceclaimparameters.resource.k8s.io"), allowed: true},
	"create namespace":                   {attrs: req(alice, "create", "namespaces").object(makeNamespace("team-b", nil)), allowed: true},
	"delete namespace":                   {attrs: req(alice, "delete", "namespaces").named("team-b"), allowed: true},
	"create namespaced custom resource":  {attrs: req(alice, "create", "cards.dra.example.com"), allowed: true},
	"update custom resource status":      {attrs: req(alice, "update", "cards.dra.example.com/status").named("c"), allowed: true},
	"create cluster custom resource":     {attrs: req(alice, "create", "cards.dra.example.com").cluster(), reason: "only write namespaced custom resources"},
	"k8s.io group is not custom":         {attrs: req(alice, "create", "networkpolicies.networking.k8s.io"), reason: "may not create"},
	"write class params denied":          {attrs: req(alice, "create", "resourceclassparameters.resource.k8s.io"), reason: `user "alice" may not create resourceclassparameters.resource.k8s.io`},
	"update class params denied":         {attrs: req(alice, "update", "resourceclassparameters.resource.k8s.io").named("params")},
	"write claim status denied":          {attrs: req(alice, "update", "resourceclaims.resource.k8s.io/status").named("gpu-claim"), reason: "without subresources"},
	"write pod status denied":            {attrs: req(alice, "patch", "pods/status").named("p1")},
	"bind pod denied":                    {attrs: req(alice, "create", "pods/binding").named("p1")},
	"create slice denied":                {attrs: req(alice, "create", "noderesourceslices.resource.k8s.io")},
	"delete slice denied":                {attrs: req(alice, "delete", "noderesourceslices.resource.k8s.io").named("s")},
	"create class denied":                {attrs: req(alice, "create", "resourceclasses.resource.k8s.io")},
	"update node denied":                 {attrs: req(alice, "update", "nodes").named("n1")},
	"create crd denied":                  {attrs: req(alice, "create", "customresourcedefinitions.apiextensions.k8s.io")},
	"create quota denied":                {attrs: req(alice, "create", "resourcequotas")},
	"create scheduling context denied":   {attrs: req(alice, "create", "podschedulingcontexts.resource.k8s.io")},
	"update scheduling context denied":   {attrs: req(alice, "update", "podschedulingcontexts.resource.k8s.io").named("p1")},
	"scheduling context status denied":   {attrs: req(alice, "update", "podschedulingcontexts.resource.k8s.io/status").named("p1")},
	"finalize namespace denied":          {attrs: req(alice, "update", "namespaces/finalize").named("team-b")},
	"unknown verb denied":                {attrs: req(alice, "escalate", "pods"), reason: "unknown verb"},
	"deletecollection class params deny": {attrs: req(alice, "deletecollection", "resourceclassparameters.resource.k8s.io")},
}

func TestAuthorizeUser(t *testing.T) { runAuthCases(t, userCases) }

var (
	gpuClaim          = makeClaim("gpu-claim", "gpu")
	gpuClaimFinalized = gpuClaim.finalizer(resourcev1alpha2.DeleteProtectionFinalizer)
)

var schedulerCases = map[string]authCase{
	"list anything":               {attrs: req(sched, "list", "noderesourceslices.resource.k8s.io"), allowed: true},
	"bind pod":                    {attrs: req(sched, "create", "pods/binding").named("p1"), allowed: true},
	"update pod status":           {attrs: req(sched, "update", "pods/status").named("p1"), allowed: true},
	"create event":                {attrs: req(sched, "create", "events"), allowed: true},
	"patch event":                 {attrs: req(sched, "patch", "events").named("e"), allowed: true},
	"create scheduling context":   {attrs: req(sched, "create", "podschedulingcontexts.resource.k8s.io"), allowed: true},
	"update scheduling context":   {attrs: req(sched, "update", "podschedulingcontexts.resource.k8s.io").named("p1"), allowed: true},
	"delete scheduling context":   {attrs: req(sched, "delete", "podschedulingcontexts.resource.k8s.io").named("p1"), allowed: true},
	"update claim status":         {attrs: req(sched, "update", "resourceclaims.resource.k8s.io/status").named("gpu-claim"), allowed: true},
	"add claim finalizer":         {attrs: req(sched, "update", "resourceclaims.resource.k8s.io").named("gpu-claim").oldObject(gpuClaim.obj()).object(gpuClaimFinalized.obj()), allowed: true},
	"change claim labels denied":  {attrs: req(sched, "update", "resourceclaims.resource.k8s.io").named("gpu-claim").oldObject(gpuClaim.obj()).object(gpuClaim.label("a", "b").obj()), reason: "only change metadata.finalizers"},
	"update node denied":          {attrs: req(sched, "update", "nodes").named("n1"), reason: "scheduler"},
	"update node status denied":   {attrs: req(sched, "update", "nodes/status").named("n1")},
	"create pod denied":           {attrs: req(sched, "create", "pods")},
	"delete pod denied":           {attrs: req(sched, "delete", "pods").named("p1")},
	"sched context status denied": {attrs: req(sched, "update", "podschedulingcontexts.resource.k8s.io/status").named("p1")},
	"create slice denied":         {attrs: req(sched, "create", "noderesourceslices.resource.k8s.io")},
	"create claim denied":         {attrs: req(sched, "create", "resourceclaims.resource.k8s.io")},
}

func TestAuthorizeScheduler(t *testing.T) { runAuthCases(t, schedulerCases) }

var controllerManagerCases = map[string]authCase{
	"watch anything":               {attrs: req(cm, "watch", "pods"), allowed: true},
	"create claim":                 {attrs: req(cm, "create", "resourceclaims.resource.k8s.io"), allowed: true},
	"remove claim finalizer":       {attrs: req(cm, "update", "resourceclaims.resource.k8s.io").named("gpu-claim"), allowed: true},
	"delete claim":                 {attrs: req(cm, "delete", "resourceclaims.resource.k8s.io").named("gpu-claim"), allowed: true},
	"update claim status":          {attrs: req(cm, "patch", "resourceclaims.resource.k8s.io/status").named("gpu-claim"), allowed: true},
	"update pod status":            {attrs: req(cm, "update", "pods/status").named("p1"), allowed: true},
	"delete pod":                   {attrs: req(cm, "delete", "pods").named("p1"), allowed: true},
	"create scheduling context":    {attrs: req(cm, "create", "podschedulingcontexts.resource.k8s.io"), allowed: true},
	"create event":                 {attrs: req(cm, "create", "events"), allowed: true},
	"update node status":           {attrs: req(cm, "update", "nodes/status").named("n1"), allowed: true},
	"delete slice":                 {attrs: req(cm, "delete", "noderesourceslices.resource.k8s.io").named("s"), allowed: true},
	"delete namespace":             {attrs: req(cm, "delete", "namespaces").named("team-b"), allowed: true},
	"finalize namespace":           {attrs: req(cm, "update", "namespaces/finalize").named("team-b"), allowed: true},
	"update namespace status":      {attrs: req(cm, "update", "namespaces/status").named("team-b"), allowed: true},
	"update quota status":          {attrs: req(cm, "update", "resourcequotas/status").named("q"), allowed: true},
	"delete custom resource":       {attrs: req(cm, "delete", "cards.dra.example.com").named("c"), allowed: true},
	"delete class params":          {attrs: req(cm, "delete", "resourceclassparameters.resource.k8s.io").named("p"), allowed: true},
	"deletecollection pods":        {attrs: req(cm, "deletecollection", "pods"), allowed: true},
	"create pod denied":            {attrs: req(cm, "create", "pods"), reason: "controller-manager"},
	"update node denied":           {attrs: req(cm, "update", "nodes").named("n1")},
	"create slice denied":          {attrs: req(cm, "create", "noderesourceslices.resource.k8s.io")},
	"update slice denied":          {attrs: req(cm, "update", "noderesourceslices.resource.k8s.io").named("s")},
	"update quota denied":          {attrs: req(cm, "update", "resourcequotas").named("q")},
	"create class denied":          {attrs: req(cm, "create", "resourceclasses.resource.k8s.io")},
	"create class params denied":   {attrs: req(cm, "create", "resourceclassparameters.resource.k8s.io")},
	"bind pod denied":              {attrs: req(cm, "create", "pods/binding").named("p1")},
	"delete of subresource denied": {attrs: req(cm, "delete", "pods/status").named("p1")},
}

func TestAuthorizeControllerManager(t *testing.T) { runAuthCases(t, controllerManagerCases) }

func TestIsPublicPath(t *testing.T) {
	cases := map[string]struct {
		path string
		want bool
	}{
		"healthz":          {"/healthz", true},
		"readyz":           {"/readyz", true},
		"livez":            {"/livez", true},
		"version":          {"/version", true},
		"readyz sub-check": {"/readyz/etcd", true},
		"api":              {"/api/v1/pods", false},
		"prefix only":      {"/healthzfoo", false},
		"dot-dot escape":   {"/healthz/../api/v1/pods", false},
		"double slash":     {"//healthz", false},
		"trailing slash":   {"/healthz/", false},
		"empty":            {"", false},
		"root":             {"/", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsPublicPath(tc.path); got != tc.want {
				t.Errorf("IsPublicPath(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}

func TestAsConvertsUnstructured(t *testing.T) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(makeSlice("s", "n2"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	d := Authorize(context.Background(), Attributes(req(node1, "create", "noderesourceslices.resource.k8s.io").object(u)), testLookup())
	if d.Allowed || !strings.Contains(d.Reason, `not "n2"`) {
		t.Errorf("decision = %+v, want denial naming n2", d)
	}
}
