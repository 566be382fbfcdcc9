package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The role matrix: for every resource the server serves (Resources, and
// custom resources), every subresource and every verb, what each role may
// do. A row per resource and subresource is required: a resource added to
// Resources without one fails TestRoleMatrix. Reads are the same for every
// role but node (below) and node-driver, whose reads are in its cells like
// its writes; a role missing from a row writes nothing there (and a
// node-driver reads nothing there).
//
// A cell lists verbs, then optionally " if CONDITION"; clauses are
// separated by ";". For a conditional clause the test checks both an
// object that meets the condition (allowed) and one that does not (denied).
var roleMatrix = map[string]map[Role]string{
	"namespaces": {RoleUser: "delete deletecollection; create update patch if namespace-marks",
		RoleControllerManager: "delete deletecollection; update patch if namespace-marks"},
	"namespaces/status":   {RoleControllerManager: "update patch"},
	"namespaces/finalize": {RoleControllerManager: "update patch"},
	"nodes": {RoleNode: "create update patch if own-node-marks", RoleControllerManager: "delete deletecollection; update patch if metadata-only",
		RoleNodeDriver: "get if own-node"},
	"nodes/status": {RoleNode: "update patch if own-node", RoleControllerManager: "update patch"},
	"pods":         {RoleUser: "delete deletecollection; create update patch if pod-marks", RoleNode: "delete if bound-pod", RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"pods/status":  {RoleScheduler: "update patch", RoleControllerManager: "update patch", RoleNode: "update patch if bound-pod"},
	"pods/binding": {RoleScheduler: "create"},
	"pods/log":     {},
	"events": {RoleUser: allWrites, RoleScheduler: "create update patch", RoleControllerManager: "create update patch delete deletecollection",
		RoleNode: "create update patch", RoleDriver: "create update patch", RoleNodeDriver: "create update patch"},
	"resourcequotas":                  {RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"resourcequotas/status":           {RoleControllerManager: "update patch"},
	"resourceclasses.resource.k8s.io": {RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"resourceclaims.resource.k8s.io": {RoleUser: "delete deletecollection; create update patch if claim-marks",
		RoleScheduler: "update patch if finalizers-only", RoleControllerManager: "create update patch delete deletecollection",
		RoleDriver: "update patch if driver-claim-finalizers", RoleNodeDriver: "get if node-driver-claim"},
	"resourceclaims.resource.k8s.io/status": {RoleScheduler: "update patch", RoleControllerManager: "update patch", RoleDriver: "update patch if driver-claim",
		RoleNodeDriver: "update patch if node-driver-claim-status"},
	"resourceclaimtemplates.resource.k8s.io":       {RoleUser: allWrites, RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"podschedulingcontexts.resource.k8s.io":        {RoleScheduler: "create update patch delete", RoleControllerManager: "create update patch delete deletecollection"},
	"podschedulingcontexts.resource.k8s.io/status": {RoleDriver: "update patch if driver-context"},
	"noderesourceslices.resource.k8s.io": {RoleNode: "create update patch delete if own-slice",
		RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"resourceclaimparameters.resource.k8s.io": {RoleUser: allWrites, RoleDriver: "create update patch delete if driver-params",
		RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"resourceclassparameters.resource.k8s.io": {RoleDriver: "create update patch delete if driver-params",
		RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"deviceclasses.resource.k8s.io": {RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"resourceslices.resource.k8s.io": {RoleNode: "create update patch delete if own-resourceslice",
		RoleDriver:            "create update patch delete if driver-resourceslice",
		RoleNodeDriver:        "get; list watch if node-driver-selector; create update patch delete if node-driver-resourceslice",
		RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"devicetaintrules.resource.k8s.io": {RoleControllerManager: "delete deletecollection; update patch if metadata-only",
		RoleDriver: "create update patch delete if driver-taintrule"},
	"devicetaintrules.resource.k8s.io/status":               {RoleControllerManager: "update patch"},
	"customresourcedefinitions.apiextensions.k8s.io":        {RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"customresourcedefinitions.apiextensions.k8s.io/status": {},
	// Leases: each component writes its own; users theirs, outside the
	// system namespaces; the controller manager also deletes (garbage
	// collection).
	"leases.coordination.k8s.io": {RoleUser: "create update patch delete deletecollection if user-lease",
		RoleScheduler: "create update patch delete if scheduler-lease", RoleControllerManager: "delete deletecollection; create update patch if cm-lease",
		RoleNode: "create update patch delete if own-lease"},
	// Custom resources: namespaced ones are the users', with any
	// subresource; cluster-scoped ones are admins'.
	"cards.dra.example.com":         {RoleUser: allWrites, RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"cards.dra.example.com/status":  {RoleUser: allWrites},
	"clusterwidgets.example.com":    {RoleControllerManager: "delete deletecollection; update patch if metadata-only"},
	"clusterwidgets.example.com/st": {},
}

const allWrites = "create update patch delete deletecollection"

// nodeReads are what a node reads, main resource and status.
var nodeReads = []string{"nodes", "pods", "resourceclaims.resource.k8s.io", "resourceclasses.resource.k8s.io",
	"noderesourceslices.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io", "namespaces",
	"deviceclasses.resource.k8s.io", "resourceslices.resource.k8s.io", "leases.coordination.k8s.io"}

var matrixRoles = []User{alice, sched, cm, node1, gpuDrv, gpuN1}

// matrixResources are Resources and two custom resources, with their
// subresources, as "resource.group[/sub]" and whether namespaced.
func matrixResources() map[string]bool {
	out := map[string]bool{
		"cards.dra.example.com": true, "cards.dra.example.com/status": true,
		"clusterwidgets.example.com": false, "clusterwidgets.example.com/st": false,
	}
	for _, r := range Resources {
		key := r.Resource
		if r.Group != "" {
			key += "." + r.Group
		}
		out[key] = r.Namespaced
		for _, sub := range r.Subresources {
			out[key+"/"+sub] = r.Namespaced
		}
	}
	return out
}

func TestRoleMatrix(t *testing.T) {
	lk := testLookup()
	verbs := append(append([]string{}, readVerbs...), writeVerbs...)
	for res, namespaced := range matrixResources() {
		row, ok := roleMatrix[res]
		if !ok {
			t.Errorf("%s has no row in the role matrix: decide what each role may do with it", res)
			continue
		}
		for _, u := range matrixRoles {
			allowed, conds := parseCell(row[u.Role])
			for _, verb := range verbs {
				a := req(u, verb, res)
				if !namespaced {
					a = a.cluster()
				}
				a = a.named("x")
				name := fmt.Sprintf("%s %s %s", u.Role, verb, res)
				switch cond, conditional := conds[verb]; {
				case isRead(verb) && u.Role != RoleNodeDriver:
					want := u.Role != RoleNode || nodeMayRead(res)
					checkDecision(t, name, a, lk, want)
				case conditional:
					good, bads := conditionCases(t, cond, a)
					checkDecision(t, name+" ("+cond+" met)", good, lk, true)
					for i, bad := range bads {
						checkDecision(t, fmt.Sprintf("%s (%s not met, case %d)", name, cond, i), bad, lk, false)
					}
				default:
					a = a.object(genericObject(res)).oldObject(genericObject(res))
					checkDecision(t, name, a, lk, slices.Contains(allowed, verb))
				}
			}
		}
		for _, u := range []User{root, {}} {
			for _, verb := range verbs {
				checkDecision(t, fmt.Sprintf("%q %s %s", u.Name, verb, res), req(u, verb, res).named("x"), lk, u.Role == RoleAdmin)
			}
		}
	}
}

func nodeMayRead(res string) bool {
	main, sub, _ := strings.Cut(res, "/")
	return slices.Contains(nodeReads, main) && (sub == "" || sub == "status")
}

// parseCell returns a cell's unconditional verbs and, per conditional
// verb, its condition.
func parseCell(cell string) ([]string, map[string]string) {
	var allowed []string
	conds := map[string]string{}
	for _, clause := range strings.Split(cell, ";") {
		verbs, cond, _ := strings.Cut(strings.TrimSpace(clause), " if ")
		for _, v := range strings.Fields(verbs) {
			if cond != "" {
				conds[v] = cond
			} else {
				allowed = append(allowed, v)
			}
		}
	}
	return allowed, conds
}

func checkDecision(t *testing.T, name string, a attrs, lk Lookup, want bool) {
	t.Helper()
	d := Authorize(context.Background(), Attributes(a), lk)
	if d.Allowed != want {
		t.Errorf("%s: allowed=%v, want %v (%s)", name, d.Allowed, want, d.Reason)
	}
	if d.Reason == "" {
		t.Errorf("%s: no reason", name)
	}
}

// genericObject is an object of any kind with nothing a condition looks
// for: unconditional rules must hold for it.
func genericObject(res string) runtime.Object {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Thing",
		"metadata": map[string]any{"name": "x", "namespace": testNS}}}
	if strings.HasPrefix(res, "resourceclaims.") {
		return makeClaim("x", "gpu").obj()
	}
	return u
}

// conditionCases returns a request that meets cond and the requests that
// do not, for the verb and resource of a: the mark conditions (a write
// that keeps every privileged mark, marks.go) have a case per way to
// break them; the others are conditionFixtures.
func conditionCases(t *testing.T, cond string, a attrs) (good attrs, bads []attrs) {
	t.Helper()
	// change returns a with obj written over old (no old for a create).
	change := func(a attrs, obj, old runtime.Object) attrs {
		a = a.object(obj)
		if a.Verb != "create" {
			a = a.oldObject(old)
		}
		return a
	}
	create := a.Verb == "create"
	switch cond {
	case "namespace-marks":
		plain := makeNamespace("x", map[string]string{"team": "b"})
		labelled := makeNamespace("x", map[string]string{"team": "b", AdminAccessLabel: "true"})
		relabelled := makeNamespace("x", map[string]string{"team": "c", AdminAccessLabel: "true"})
		off := makeNamespace("x", map[string]string{"team": "b", AdminAccessLabel: "false"})
		if create {
			return change(a, plain, nil), []attrs{change(a, labelled, nil), change(a, off, nil)}
		}
		return change(a, relabelled, labelled), []attrs{change(a, labelled, plain), change(a, off, labelled), change(a, plain, labelled)}
	case "pod-marks":
		plain := podWithAnnotations(map[string]string{"note": "x"})
		gpu0 := podWithAnnotations(map[string]string{"note": "x", "cdi.k8s.io/gpu": "example.com/gpu=gpu0"})
		gpu1 := podWithAnnotations(map[string]string{"note": "x", "cdi.k8s.io/gpu": "example.com/gpu=gpu1"})
		noted := podWithAnnotations(map[string]string{"note": "y", "cdi.k8s.io/gpu": "example.com/gpu=gpu0"})
		if create {
			return change(a, plain, nil), []attrs{change(a, gpu0, nil)}
		}
		return change(a, noted, gpu0), []attrs{change(a, gpu0, plain), change(a, gpu1, gpu0), change(a, plain, gpu0)}
	case "own-node-marks":
		good, other := conditionFixtures(t, "own-node", a)
		n1 := makeNode("n1")
		oos := withTaint(n1, OutOfServiceTaint, corev1.TaintEffectNoExecute)
		cordoned := n1.DeepCopy()
		cordoned.Spec.Unschedulable = true
		own := a.named("n1")
		if create {
			return good, []attrs{other, change(own, oos, nil)}
		}
		return good, []attrs{other, change(own, oos, n1), change(own, n1, oos), change(own, n1, cordoned)}
	}
	good, bad := conditionFixtures(t, cond, a)
	return good, []attrs{bad}
}

// conditionFixtures returns a request that meets cond and one that does
// not, for the verb and resource of a.
func conditionFixtures(t *testing.T, cond string, a attrs) (good, bad attrs) {
	t.Helper()
	create, del := a.Verb == "create", a.Verb == "delete"
	withObjects := func(a attrs, obj, old runtime.Object) attrs {
		if !del {
			a = a.object(obj)
		}
		if !create {
			a = a.oldObject(old)
		}
		return a
	}
	switch cond {
	case "metadata-only":
		old := genericObject(a.Resource).(*unstructured.Unstructured)
		meta, relabelled := old.DeepCopy(), old.DeepCopy()
		meta.SetFinalizers([]string{"example.com/f"})
		relabelled.SetLabels(map[string]string{"a": "b"})
		return a.object(meta).oldObject(old), a.object(relabelled).oldObject(old)
	case "own-node":
		return withObjects(a.named("n1"), makeNode("n1"), makeNode("n1")), withObjects(a.named("n2"), makeNode("n2"), makeNode("n2"))
	case "bound-pod":
		return a.named("p1"), a.named("p2") // read from the lookup: p1 is on n1, p2 on n2
	case "own-slice":
		return withObjects(a, makeSlice("s", "n1"), makeSlice("s", "n1")), withObjects(a, makeSlice("s", "n2"), makeSlice("s", "n2"))
	case "own-resourceslice":
		return withObjects(a, makeResourceSlice("n1", "other.example.com"), makeResourceSlice("n1", "other.example.com")),
			withObjects(a, makeResourceSlice("n2", "other.example.com"), makeResourceSlice("n2", "other.example.com"))
	case "driver-resourceslice":
		return withObjects(a, makeResourceSlice("n2", "gpu.example.com"), makeResourceSlice("n2", "gpu.example.com")),
			withObjects(a, makeResourceSlice("n2", "fpga.example.com"), makeResourceSlice("n2", "fpga.example.com"))
	case "driver-taintrule":
		return withObjects(a, makeTaintRule("gpu.example.com"), makeTaintRule("gpu.example.com")),
			withObjects(a, makeTaintRule("fpga.example.com"), makeTaintRule(""))
	case "node-driver-selector":
		return a.selecting("spec.driver=gpu.example.com,spec.nodeName=n1"), a.selecting("spec.nodeName=n1")
	case "node-driver-resourceslice":
		return withObjects(a, makeResourceSlice("n1", "gpu.example.com"), makeResourceSlice("n1", "gpu.example.com")),
			withObjects(a, makeResourceSlice("", "gpu.example.com"), makeResourceSlice("", "gpu.example.com"))
	case "node-driver-claim":
		return a.named("nd-own"), a.named("nd-other-node")
	case "node-driver-claim-status":
		own := v1ClaimFor("nd-own", "gpu.example.com", "p1", "uid-p1")
		other := v1ClaimFor("nd-other-node", "gpu.example.com", "p2", "uid-p2")
		return a.named("nd-own").oldObject(own).object(withDeviceStatus(own.DeepCopy(), "gpu.example.com")),
			a.named("nd-other-node").oldObject(other).object(withDeviceStatus(other.DeepCopy(), "gpu.example.com"))
	case "finalizers-only":
		return a.named("gpu-claim").object(gpuClaimFinalized.obj()).oldObject(gpuClaim.obj()),
			a.named("gpu-claim").object(gpuClaim.label("a", "b").obj()).oldObject(gpuClaim.obj())
	case "driver-claim":
		return a.named("gpu-claim"), a.named("fpga-claim")
	case "driver-claim-finalizers":
		fpga := makeClaim("fpga-claim", "fpga")
		return a.named("gpu-claim").object(gpuClaimFinalized.obj()).oldObject(gpuClaim.obj()),
			a.named("fpga-claim").object(fpga.finalizer("f").obj()).oldObject(fpga.obj())
	case "driver-context":
		return a.named("p1"), a.named("p2") // p1 has a claim of a gpu.example.com class, p2 not
	case "driver-params":
		own, other := paramsFrom(a.Resource, "gpu.example.com"), paramsFrom(a.Resource, "other.example.com")
		return withObjects(a, own, own), withObjects(a, other, other)
	case "user-lease":
		return a.inNS(testNS), a.inNS(NodeLeaseNamespace)
	case "scheduler-lease", "cm-lease", "own-lease":
		ns, name := SystemNamespace, SchedulerLeaseName
		switch cond {
		case "cm-lease":
			name = ControllerManagerLeaseName
		case "own-lease":
			ns, name = NodeLeaseNamespace, "n1"
		}
		// The other lease's holder changes: not a metadata-only write,
		// which the controller manager may make to any object.
		own, other := makeLease(ns, name, "a"), makeLease(ns, "n2", "a")
		return withObjects(a.inNS(ns).named(name), makeLease(ns, name, "b"), own),
			withObjects(a.inNS(ns).named("n2"), makeLease(ns, "n2", "b"), other)
	case "claim-marks":
		return withObjects(a, gpuClaim.obj(), gpuClaim.obj()), withObjects(a, gpuClaimFinalized.obj(), gpuClaim.obj())
	}
	t.Fatalf("unknown condition %q", cond)
	return a, a
}

func paramsFrom(resource, group string) runtime.Object {
	if resource == "resourceclaimparameters" {
		return &resourcev1alpha2.ResourceClaimParameters{GeneratedFrom: &resourcev1alpha2.ResourceClaimParametersReference{APIGroup: group}}
	}
	return &resourcev1alpha2.ResourceClassParameters{GeneratedFrom: &resourcev1alpha2.ResourceClassParametersReference{APIGroup: group}}
}

func makeLease(ns, name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
}
