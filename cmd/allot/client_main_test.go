package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// The CLI tests run the real binary against a real `allot up`, as a user
// would.
var (
	allotBin    string
	testCluster *clienttest.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "allot-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if allotBin, err = clienttest.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testCluster, err = clienttest.Start(ctx, allotBin, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testCluster.Stop()
	return m.Run()
}

// cliResult is what one CLI run printed.
type cliResult struct {
	stdout, stderr string
	err            error
}

// runCLI runs `allot ARGS...` with stdin, against the test cluster through
// $KUBECONFIG.
func runCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	return runTool(t, allotBin, stdin, args...)
}

func runTool(t *testing.T, bin, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = testCluster.Env()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return cliResult{stdout: out.String(), stderr: errOut.String(), err: err}
}

// allot runs the CLI and fails the test if it fails.
func allot(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, "", args...)
	if r.err != nil {
		t.Fatalf("allot %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// allotFails runs the CLI, expects exit code 1 and returns stderr.
func allotFails(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, "", args...)
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("allot %s: err = %v, want exit code 1\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stderr
}

// writeManifest writes a manifest into the test's temp dir.
func writeManifest(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeManifestIn(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newTestClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewForKubeconfig(testCluster.Kubeconfig)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fields splits printed table lines into their cells.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l != "" {
			rows = append(rows, strings.Fields(l))
		}
	}
	return rows
}

// column returns the cells of one column, header included.
func column(rows [][]string, i int) []string {
	var out []string
	for _, r := range rows {
		if i < len(r) {
			out = append(out, r[i])
		}
	}
	return out
}

func assertEqual[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// manifest templates; %[1]s is the namespace.
const podAndClaim = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: %[1]s
  labels: {app: web}
spec:
  containers:
  - name: c
    image: busybox
---
apiVersion: v1
kind: Pod
metadata:
  name: db
  namespace: %[1]s
  labels: {app: db}
spec:
  nodeName: cli-node
  containers:
  - name: c
    image: busybox
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata:
  name: gpu
  namespace: %[1]s
spec:
  resourceClassName: gpu-class
---
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
`

// applyFixture applies podAndClaim in a new namespace named after base
// and returns the namespace.
func applyFixture(t *testing.T, base string) string {
	t.Helper()
	ns := uniqueName(base)
	allot(t, "apply", "-f", writeManifest(t, "fixture.yaml", fmt.Sprintf(podAndClaim, ns)))
	return ns
}

var nameSeq atomic.Int64

// uniqueName appends a sequence number to base, so that the tests pass
// again with -count=N against the same cluster.
func uniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, nameSeq.Add(1))
}
