package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runSimulate(t *testing.T, args ...string) (string, string) {
	t.Helper()
	cmd := newSimulateCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("simulate %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

func TestSimulateSeedExample(t *testing.T) {
	seed := filepath.Join("..", "..", "examples", "manifests", "seed-002.yaml")
	out, _ := runSimulate(t, "-f", seed)
	for _, want := range []string{"kind: List", "reason: Unschedulable", `versions["runtimeVersion"] >= "v12.0.0"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	lowered := filepath.Join(t.TempDir(), "v11.yaml")
	if err := os.WriteFile(lowered, bytes.ReplaceAll(data, []byte("v12.0.0"), []byte("v11.0.0")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = runSimulate(t, "-f", lowered, "-o", "json")
	if strings.Count(out, `"id": "`) != 2 || !strings.Contains(out, `"nodeName": "worker-1"`) {
		t.Fatalf("lowered selector should fit with two instances on worker-1:\n%s", out)
	}
}

func TestSimulateNodeTemplate(t *testing.T) {
	seed := filepath.Join("..", "..", "examples", "manifests", "seed-002.yaml")
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "template.yaml")
	node := `apiVersion: v1
kind: Node
metadata: {name: big}
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1alpha2
kind: NodeResourceSlice
metadata: {name: big-cards}
spec:
  nodeName: big
  driverName: cards.dra.example.com
  partitionable:
    commonAttributes:
    - name: a
      attributes:
      - {name: runtimeVersion, version: "12.1.0"}
      - {name: memory, quantity: 16Gi}
    resourceInstances:
    - {name: gpu-0, commonAttributesRefs: [a]}
    - {name: gpu-1, commonAttributesRefs: [a]}
`
	if err := os.WriteFile(tmpl, []byte(node), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := runSimulate(t, "-f", seed, "--node-template", tmpl)
	if !strings.Contains(stderr, "new nodes needed: 1") {
		t.Fatalf("stderr = %q, want one new node", stderr)
	}
}
