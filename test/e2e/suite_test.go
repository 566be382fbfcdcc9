package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The foundation suite drives a running cluster with kubectl as a user
// would, step by step; each step builds on the ones before it.

// ns is the namespace of seed-002.yaml, where the suite's pods live too.
const ns = "user-namespace"

// v1alpha2Claims names the seeds' claims for kubectl: plain
// "resourceclaims" means resource.k8s.io/v1, as on a cluster, which shows
// v1alpha2 claims as views without their spec.
const v1alpha2Claims = "resourceclaims.v1alpha2.resource.k8s.io"

// runFoundationSuite runs the steps in order and stops at the first that
// fails. It reports whether all passed.
func runFoundationSuite(t *testing.T, c *cluster) bool {
	t.Helper()
	steps := []struct {
		name string
		run  func(*testing.T, *cluster)
	}{
		{"create", stepCreate},
		{"get table", stepGetTable},
		{"get yaml", stepGetYAML},
		{"replace", stepReplace},
		{"apply", stepApply},
		{"label", stepLabel},
		{"watch", stepWatch},
		{"delete", stepDelete},
		{"strict decoding", stepStrictDecoding},
		{"restart", stepRestart},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, c) }) {
			return false
		}
	}
	return true
}

func stepCreate(t *testing.T, c *cluster) {
	objects, crd := seed002(t)
	out := c.kubectl(t, "create", "-f", crd)
	requireLines(t, "kubectl create -f seed-002-crd.yaml", out,
		"customresourcedefinition.apiextensions.k8s.io/cardparameters.dra.example.com created")
	out = c.kubectl(t, "wait", "--for=condition=Established", "crd/cardparameters.dra.example.com", "--timeout=60s")
	requireLines(t, "kubectl wait --for=condition=Established", out,
		"customresourcedefinition.apiextensions.k8s.io/cardparameters.dra.example.com condition met")
	out = c.kubectl(t, "create", "-f", objects, "-f", "testdata/pods.yaml")
	requireLines(t, "kubectl create -f seed-002.yaml -f pods.yaml", out,
		"namespace/user-namespace created",
		"node/worker-1 created",
		"noderesourceslice.resource.k8s.io/worker-1-cards created",
		"cardparameters.dra.example.com/my-parameters created",
		"resourceclaimparameters.resource.k8s.io/my-parameters-generated created",
		"resourceclass.resource.k8s.io/acme-cards created",
		"resourceclaim.resource.k8s.io/two-cards created",
		"pod/card-user created",
		"pod/web created",
		"pod/worker created",
		"pod/temp-1 created",
		"pod/temp-2 created",
	)
	stderr := c.kubectlExpectFail(t, "create", "-f", "testdata/pods.yaml")
	requireContains(t, "kubectl create -f of existing pods: stderr", stderr,
		`Error from server (AlreadyExists)`, `pods "web" already exists`)
}

func stepGetTable(t *testing.T, c *cluster) {
	requireTable(t, c.kubectl(t, "get", "namespaces"), []string{"NAME", "STATUS", "AGE"},
		map[string]map[string]string{
			"default": {"STATUS": "Active"}, "kube-system": {"STATUS": "Active"}, ns: {"STATUS": "Active"},
		})
	requireTable(t, c.kubectl(t, "get", "nodes"), []string{"NAME", "STATUS", "AGE", "VERSION"},
		map[string]map[string]string{"worker-1": {"STATUS": "Ready"}})
	requireTable(t, c.kubectl(t, "get", "pods", "-n", ns, "-o", "wide"),
		[]string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"},
		map[string]map[string]string{
			"card-user": {"READY": "0/1", "STATUS": "Pending", "RESTARTS": "0"},
			"web":       {"READY": "0/1", "STATUS": "Pending", "RESTARTS": "0"},
			"worker":    {"READY": "0/1", "STATUS": "Pending"},
			"temp-1":    {"READY": "0/1"},
		})
	requireTable(t, c.kubectl(t, "get", "resourceclasses"), []string{"NAME", "DRIVER", "CONTROLLER", "AGE"},
		map[string]map[string]string{"acme-cards": {"DRIVER": "cards.dra.example.com", "CONTROLLER": "<structured>"}})
	// resourceclaims means v1, as on a cluster; the seed's claims are
	// v1alpha2, whose table this asserts.
	requireTable(t, c.kubectl(t, "get", v1alpha2Claims, "-n", ns),
		[]string{"NAME", "CLASS", "ALLOCATION", "STATE", "AGE"},
		map[string]map[string]string{"two-cards": {"CLASS": "acme-cards", "ALLOCATION": "WaitForFirstConsumer", "STATE": "pending"}})
	requireTable(t, c.kubectl(t, "get", "noderesourceslices"), []string{"NAME", "NODE", "DRIVER", "AGE"},
		map[string]map[string]string{"worker-1-cards": {"NODE": "worker-1", "DRIVER": "cards.dra.example.com"}})
	requireTable(t, c.kubectl(t, "get", "crd"), []string{"NAME", "CREATED AT"},
		map[string]map[string]string{"cardparameters.dra.example.com": {}})
	requireTable(t, c.kubectl(t, "get", "cardparameters", "-n", ns), []string{"NAME", "AGE"},
		map[string]map[string]string{"my-parameters": {}})
	out := c.kubectl(t, "get", "pods", "-n", ns, "-l", "lifetime=temporary", "-o", "name")
	requireLines(t, "kubectl get pods -l lifetime=temporary -o name", out, "pod/temp-1", "pod/temp-2")
}

func stepGetYAML(t *testing.T, c *cluster) {
	requireFields(t, "resourceclaim two-cards", c.getYAML(t, v1alpha2Claims, "two-cards", "-n", ns), map[string]any{
		"apiVersion":                  "resource.k8s.io/v1alpha2",
		"kind":                        "ResourceClaim",
		"metadata.name":               "two-cards",
		"metadata.namespace":          ns,
		"metadata.uid":                nonEmpty,
		"metadata.resourceVersion":    nonEmpty,
		"metadata.creationTimestamp":  nonEmpty,
		"spec.resourceClassName":      "acme-cards",
		"spec.parametersRef.apiGroup": "dra.example.com",
		"spec.parametersRef.kind":     "CardParameters",
		"spec.parametersRef.name":     "my-parameters",
	})
	// The partitionable model nests; the deepest leaf must survive the
	// round trip through etcd.
	requireFields(t, "noderesourceslice worker-1-cards", c.getYAML(t, "noderesourceslice", "worker-1-cards"), map[string]any{
		"kind":          "NodeResourceSlice",
		"spec.nodeName": "worker-1",
		"spec.partitionable.commonAttributes.0.attributes.1.version":                                                    "11.1.42",
		"spec.partitionable.commonAttributes.1.attributes.1.quantity":                                                   "16Gi",
		"spec.partitionable.resourceInstances.1.partitions.2.resourceInstances.1.partitions.1.name":                     "quarters",
		"spec.partitionable.resourceInstances.1.partitions.2.resourceInstances.1.partitions.1.resourceInstances.1.name": "quarter-1",
	})
	requireFields(t, "cardparameters my-parameters", c.getYAML(t, "cardparameters", "my-parameters", "-n", ns), map[string]any{
		"apiVersion":            "dra.example.com/v1alpha1",
		"kind":                  "CardParameters",
		"metadata.uid":          nonEmpty,
		"spec.count":            2,
		"spec.minimumMemory":    "8Gi",
		"spec.sharing.strategy": "TimeSliced",
	})
	requireFields(t, "pod card-user", c.getYAML(t, "pod", "card-user", "-n", ns), map[string]any{
		"apiVersion":                 "v1",
		"kind":                       "Pod",
		"spec.resourceClaims.0.name": "cards",
		"spec.resourceClaims.0.resourceClaimName":   "two-cards",
		"spec.containers.0.resources.claims.0.name": "cards",
		"status.phase": "Pending",
	})
}

func stepReplace(t *testing.T, c *cluster) {
	before := c.jsonpath(t, "{.metadata.uid} {.metadata.resourceVersion}", "pod", "web", "-n", ns)
	out := c.kubectl(t, "replace", "-f", "testdata/web-replaced.yaml")
	requireLines(t, "kubectl replace -f", out, "pod/web replaced")
	after := c.jsonpath(t, "{.metadata.uid} {.metadata.resourceVersion} {.metadata.labels.tier}", "pod", "web", "-n", ns)
	bUID, bRV, _ := strings.Cut(before, " ")
	f := strings.Fields(after)
	if len(f) != 3 || f[0] != bUID || f[1] == bRV || f[2] != "frontend" {
		t.Errorf("pod web after replace: uid rv tier = %q, want uid %s, a resourceVersion other than %s, tier frontend", after, bUID, bRV)
	}
}

func stepApply(t *testing.T, c *cluster) {
	out := c.kubectl(t, "apply", "-f", "testdata/apply.yaml")
	requireLines(t, "kubectl apply -f apply.yaml (first)", out,
		"pod/applied created", "cardparameters.dra.example.com/applied-params created")
	out = c.kubectl(t, "apply", "-f", "testdata/apply.yaml")
	requireLines(t, "kubectl apply -f apply.yaml (again)", out,
		"pod/applied unchanged", "cardparameters.dra.example.com/applied-params unchanged")
	out = c.kubectl(t, "apply", "-f", "testdata/apply-v2.yaml")
	requireLines(t, "kubectl apply -f apply-v2.yaml", out,
		"pod/applied configured", "cardparameters.dra.example.com/applied-params configured")
	out = c.kubectl(t, "apply", "-f", "testdata/apply-v2.yaml")
	requireLines(t, "kubectl apply -f apply-v2.yaml (again)", out,
		"pod/applied unchanged", "cardparameters.dra.example.com/applied-params unchanged")
	got := c.jsonpath(t, "{.metadata.labels.version}", "pod", "applied", "-n", ns)
	if got != "v2" {
		t.Errorf("pod applied after apply -f apply-v2.yaml: label version = %q, want v2", got)
	}
	last := c.jsonpath(t, `{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`, "pod", "applied", "-n", ns)
	requireContains(t, "pod applied: last-applied-configuration annotation", last, `"version":"v2"`)
	got = c.jsonpath(t, "{.spec.count} {.spec.minimumMemory}", "cardparameters", "applied-params", "-n", ns)
	if got != "3 4Gi" {
		t.Errorf("cardparameters applied-params after apply -f apply-v2.yaml: count minimumMemory = %q, want %q", got, "3 4Gi")
	}
}

func stepLabel(t *testing.T, c *cluster) {
	requireLines(t, "kubectl label pod", c.kubectl(t, "label", "pod", "web", "-n", ns, "x=y"), "pod/web labeled")
	requireLines(t, "kubectl label cardparameters", c.kubectl(t, "label", "cardparameters", "my-parameters", "-n", ns, "x=y"),
		"cardparameters.dra.example.com/my-parameters labeled")
	requireLines(t, "kubectl label resourceclass", c.kubectl(t, "label", "resourceclass", "acme-cards", "x=y"),
		"resourceclass.resource.k8s.io/acme-cards labeled")
	for _, args := range [][]string{{"pod", "web", "-n", ns}, {"cardparameters", "my-parameters", "-n", ns}, {"resourceclass", "acme-cards"}} {
		if got := c.jsonpath(t, "{.metadata.labels.x}", args...); got != "y" {
			t.Errorf("%s after kubectl label x=y: label x = %q, want y", strings.Join(args, " "), got)
		}
	}
	out := c.kubectl(t, "get", "pods", "-n", ns, "-l", "x=y", "-o", "name")
	requireLines(t, "kubectl get pods -l x=y -o name", out, "pod/web")
	stderr := c.kubectlExpectFail(t, "label", "pod", "web", "-n", ns, "x=z")
	requireContains(t, "kubectl label without --overwrite: stderr", stderr, "already has a value (y)")
}

// seed002 splits the repository's one copy of seed 002's example
// (examples/manifests/seed-002.yaml) into two files, its
// CustomResourceDefinition and everything else, for kubectl: it cannot
// create a custom resource in the call that defines its kind.
func seed002(t *testing.T) (objects, crd string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "manifests", "seed-002.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs, crds []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "\nkind: CustomResourceDefinition\n") {
			crds = append(crds, doc)
		} else {
			objs = append(objs, doc)
		}
	}
	if len(crds) != 1 {
		t.Fatalf("seed-002.yaml: %d CustomResourceDefinitions, want 1", len(crds))
	}
	dir := t.TempDir()
	objects, crd = filepath.Join(dir, "seed-002.yaml"), filepath.Join(dir, "seed-002-crd.yaml")
	for path, docs := range map[string][]string{objects: objs, crd: crds} {
		if err := os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return objects, crd
}
