package apiserver

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"allot.dev/allot/pkg/client/clienttest"
)

// kubectl runs kubectl (clienttest.Kubectl: from PATH, else built into
// _output/bin as hack/setup.sh builds it) as
// admin against the test server's handler over TLS (kubectl sends no
// bearer token over plain HTTP), in namespace ns, with stdin; it returns
// the combined output and the exit code.
func kubectl(t *testing.T, ns, stdin string, args ...string) (string, int) {
	t.Helper()
	bin := kubectlBin(t)
	srv := httptest.NewTLSServer(testAPI.Handler())
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cfg, []byte(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "`+srv.URL+`", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: admin}}]
contexts: [{name: test, context: {cluster: test, user: admin, namespace: "`+ns+`"}}]
current-context: test
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", cfg, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "KUBECTL_EXTERNAL_DIFF=")
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), 0
}

func podManifest(name, label string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  labels: {app: ` + label + `}
spec:
  containers: [{name: c, image: busybox}]
`
}

// kubectl's server-side dry runs change nothing: apply --dry-run=server,
// diff (which is one), create and delete --dry-run=server.
func TestKubectlServerDryRun(t *testing.T) {
	kubectlBin(t)
	ns := newNamespace(t)
	pod := "/api/v1/namespaces/" + ns + "/pods/web"
	if out, code := kubectl(t, ns, podManifest("web", "one"), "apply", "-f", "-"); code != 0 {
		t.Fatalf("kubectl apply: exit %d\n%s", code, out)
	}
	before := admin(t, "GET", pod, nil)

	out, code := kubectl(t, ns, podManifest("web", "two"), "apply", "--dry-run=server", "-f", "-")
	if code != 0 || !strings.Contains(out, "pod/web configured (server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server: exit %d\n%s", code, out)
	}
	unchanged(t, pod, before, "kubectl apply --dry-run=server")

	// kubectl diff runs diff(1) (Debian's diffutils, an essential package).
	// Exit 1: differences found.
	out, code = kubectl(t, ns, podManifest("web", "two"), "diff", "-f", "-")
	if code != 1 || !strings.Contains(out, "-    app: one") || !strings.Contains(out, "+    app: two") {
		t.Fatalf("kubectl diff: exit %d\n%s", code, out)
	}
	unchanged(t, pod, before, "kubectl diff")
	if out, code = kubectl(t, ns, podManifest("web", "one"), "diff", "-f", "-"); code != 0 {
		t.Fatalf("kubectl diff of the applied manifest: exit %d\n%s", code, out)
	}

	out, code = kubectl(t, ns, podManifest("web2", "one"), "create", "--dry-run=server", "-f", "-")
	if code != 0 || !strings.Contains(out, "pod/web2 created (server dry run)") {
		t.Fatalf("kubectl create --dry-run=server: exit %d\n%s", code, out)
	}
	expect(t, admin(t, "GET", "/api/v1/namespaces/"+ns+"/pods/web2", nil), 404)
	out, code = kubectl(t, ns, "", "delete", "--dry-run=server", "pod", "web")
	// kubectl 1.32 says `pod "web" deleted (server dry run)`, 1.37 adds
	// `from NS namespace` before the parenthesis.
	if code != 0 || !strings.Contains(out, "pod \"web\" deleted") || !strings.Contains(out, "(server dry run)") {
		t.Fatalf("kubectl delete --dry-run=server: exit %d\n%s", code, out)
	}
	unchanged(t, pod, before, "kubectl delete --dry-run=server")
}

var kubectlFound struct {
	once sync.Once
	path string
	err  error
}

// kubectlBin finds (or builds, once) kubectl; without one the test fails:
// it is not optional.
func kubectlBin(t *testing.T) string {
	t.Helper()
	k := &kubectlFound
	k.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		k.path, k.err = clienttest.Kubectl(ctx)
	})
	if k.err != nil {
		t.Fatalf("kubectl: %v", k.err)
	}
	return k.path
}
