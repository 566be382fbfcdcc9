package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"allot.dev/allot/pkg/client/clienttest"
)

func TestApplyMultiDocumentThenReapply(t *testing.T) {
	ns := uniqueName("apply-multi")
	manifest := fmt.Sprintf(podAndClaim, ns)
	file := writeManifest(t, "app.yaml", manifest)
	got := allot(t, "apply", "-f", file)
	want := fmt.Sprintf("namespace/%s created\npod/web created\npod/db created\nresourceclaim.resource.k8s.io/gpu created\n", ns)
	if got != want {
		t.Fatalf("first apply printed:\n%s\nwant:\n%s", got, want)
	}
	got = allot(t, "apply", "-f", file)
	want = fmt.Sprintf("namespace/%s unchanged\npod/web unchanged\npod/db unchanged\nresourceclaim.resource.k8s.io/gpu unchanged\n", ns)
	if got != want {
		t.Fatalf("second apply printed:\n%s\nwant:\n%s", got, want)
	}
	changed := strings.Replace(manifest, "{app: web}", "{app: web, tier: front}", 1)
	r := runCLI(t, changed, "apply", "-f", "-", "--kubeconfig", testCluster.Kubeconfig)
	if r.err != nil || !strings.Contains(r.stdout, "pod/web configured\n") || !strings.Contains(r.stdout, "pod/db unchanged\n") {
		t.Fatalf("apply from stdin: err %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	if out := allot(t, "get", "pods", "-n", ns, "-l", "tier=front", "-o", "name"); out != "pod/web\n" {
		t.Fatalf("pods with the new label: %q", out)
	}
	allot(t, "apply", "-f", file) // drops the label again: three-way merge
	if out := allot(t, "get", "pods", "-n", ns, "-l", "tier", "-o", "name"); out != "" {
		t.Fatalf("label survived the re-apply: %q", out)
	}
}

func TestApplyDirectoryAndNamespaceFlag(t *testing.T) {
	ns := uniqueName("apply-dir")
	dir := t.TempDir()
	writeManifestIn(t, dir, "b.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: second}\nspec: {containers: [{name: c, image: busybox}]}\n")
	writeManifestIn(t, dir, "a.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"first"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	writeManifestIn(t, dir, "ignored.txt", "not a manifest")
	allot(t, "apply", "-f", writeManifest(t, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"))
	if got := allot(t, "apply", "-f", dir, "-n", ns); got != "pod/first created\npod/second created\n" {
		t.Fatalf("apply of a directory printed %q", got)
	}
	other := writeManifest(t, "other.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: elsewhere}\nspec: {containers: [{name: c, image: busybox}]}\n")
	if stderr := allotFails(t, "apply", "-f", other, "-n", ns); !strings.Contains(stderr, fmt.Sprintf("does not match the namespace %q", ns)) {
		t.Fatalf("namespace mismatch: %s", stderr)
	}
}

func TestApplyStrictDecodingErrorNamesFileDocumentAndField(t *testing.T) {
	file := writeManifest(t, "typo.yaml", `apiVersion: v1
kind: Namespace
metadata: {name: strict-never-created}
---
apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  containers:
  - name: c
    image: busybox
    imagePolicy: Always
`)
	stderr := allotFails(t, "apply", "-f", file)
	for _, want := range []string{"error: ", file + ": document 2", `unknown field "spec.containers[0].imagePolicy"`, "nothing was applied"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr %q lacks %q", stderr, want)
		}
	}
	if stderr := allotFails(t, "get", "ns", "strict-never-created"); !strings.Contains(stderr, "not found") {
		t.Fatalf("the namespace of document 1 was created: %s", stderr)
	}
}

func TestApplyServerErrorContinuesWithOthers(t *testing.T) {
	ns := uniqueName("apply-partial")
	file := writeManifest(t, "partial.yaml", `apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: no-such-namespace}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: `+ns+`}
`)
	r := runCLI(t, "", "apply", "-f", file)
	if r.err == nil || r.stdout != "namespace/"+ns+" created\n" {
		t.Fatalf("err %v stdout %q", r.err, r.stdout)
	}
	if !strings.Contains(r.stderr, "pod/orphan") || !strings.Contains(r.stderr, "document 1") || !strings.Contains(r.stderr, "1 of 2 objects failed") {
		t.Fatalf("stderr does not name the failed object: %s", r.stderr)
	}
}

// crdAndResource is a custom resource before its CRD; %[1]s is the group.
const crdAndResource = `apiVersion: %[1]s/v1
kind: CardParameters
metadata: {name: small, namespace: default}
spec: {memory: 1Gi}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: cardparameters.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: cardparameters, singular: cardparameters, kind: CardParameters, shortNames: [cardp]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              memory: {type: string}
`

func TestApplyCRDThenCustomResourceInOneFile(t *testing.T) {
	group := uniqueName("cli") + ".example.com"
	file := writeManifest(t, "crd.yaml", fmt.Sprintf(crdAndResource, group))
	got := allot(t, "apply", "-f", file)
	want := fmt.Sprintf("customresourcedefinition.apiextensions.k8s.io/cardparameters.%[1]s created\ncardparameters.%[1]s/small created\n", group)
	if got != want {
		t.Fatalf("apply printed:\n%s\nwant:\n%s", got, want)
	}
	for _, kind := range []string{"cardparameters." + group, "CardParameters." + group, "cardparameters.v1." + group} {
		if out := allot(t, "get", kind, "small", "-o", "name"); out != "cardparameters."+group+"/small\n" {
			t.Fatalf("get %s: %q", kind, out)
		}
	}
	if got := allot(t, "apply", "-f", file); !strings.Contains(got, "cardparameters."+group+"/small unchanged") {
		t.Fatalf("re-apply printed %q", got)
	}
}

// kubectlFound is clienttest.Kubectl's result, looked up (and maybe built)
// once.
var kubectlFound struct {
	once sync.Once
	path string
	err  error
}

func findKubectl() (string, error) {
	k := &kubectlFound
	k.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		k.path, k.err = clienttest.Kubectl(ctx)
	})
	return k.path, k.err
}

func TestKubectlApplyThenAllotApply(t *testing.T) {
	kubectl, err := findKubectl()
	if err != nil {
		t.Fatalf("%v (hack/setup.sh builds it)", err)
	}
	name := uniqueName("mixed")
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: default
  labels: {app: mixed}
  annotations: {note: "a <b> & c"}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: busybox
    args: [sleep, "1"]
    resources: {requests: {cpu: 100m}}
`
	file := writeManifest(t, "mixed.yaml", manifest)
	if r := runTool(t, kubectl, "", "apply", "-f", file); r.err != nil {
		t.Fatalf("kubectl apply: %v\n%s", r.err, r.stderr)
	}
	if got := allot(t, "apply", "-f", file); got != "pod/"+name+" unchanged\n" {
		t.Fatalf("allot apply after kubectl apply printed %q", got)
	}
	changed := writeManifest(t, "mixed2.yaml", strings.Replace(manifest, "{app: mixed}", "{app: mixed, v: two}", 1))
	if got := allot(t, "apply", "-f", changed); got != "pod/"+name+" configured\n" {
		t.Fatalf("allot apply of a change printed %q", got)
	}
	r := runTool(t, kubectl, "", "apply", "-f", changed)
	if r.err != nil || !strings.Contains(r.stdout, "pod/"+name+" unchanged") {
		t.Fatalf("kubectl apply after allot apply: %v %q %q", r.err, r.stdout, r.stderr)
	}
	r = runTool(t, kubectl, "", "apply", "-f", file)
	if r.err != nil || !strings.Contains(r.stdout, "pod/"+name+" configured") {
		t.Fatalf("kubectl apply reverting: %v %q %q", r.err, r.stdout, r.stderr)
	}
	if out := allot(t, "get", "po", name, "--show-labels", "--no-headers"); strings.Contains(out, "v=two") {
		t.Fatalf("kubectl did not remove the label allot applied: %q", out)
	}
}
