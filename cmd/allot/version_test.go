package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiversion "k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"

	"allot.dev/allot/internal/version"
)

// versionLines reads `allot version`'s "Key: value" lines.
func versionLines(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("version line %q is not \"Key: value\":\n%s", l, out)
		}
		m[k] = v
	}
	return m
}

// TestVersionCommand: against the test cluster, which runs the same
// binary, `allot version` prints one allot version for client and server,
// the one the server's /version carries, and the server's API level.
func TestVersionCommand(t *testing.T) {
	sv, err := newTestClient(t).Discovery().ServerVersionWithContext(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	serverAllot, ok := version.FromGitVersion(sv.GitVersion)
	if !ok {
		t.Fatalf("server gitVersion %q carries no allot version", sv.GitVersion)
	}

	lines := versionLines(t, allot(t, "version"))
	want := map[string]string{
		"Client Version":   serverAllot,
		"Server Version":   serverAllot,
		"Server API Level": "Kubernetes " + version.KubernetesMajor + "." + version.KubernetesMinor,
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("allot version printed %v, want %v", lines, want)
	}

	lines = versionLines(t, allot(t, "version", "--client"))
	if len(lines) != 1 || lines["Client Version"] != serverAllot {
		t.Errorf("allot version --client printed %v, want only Client Version: %s", lines, serverAllot)
	}
}

// TestVersionCommandStructured: -o json and -o yaml print kubectl
// version's shape, both sides in /version's shape.
func TestVersionCommandStructured(t *testing.T) {
	sv, err := newTestClient(t).Discovery().ServerVersionWithContext(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "yaml"} {
		var out versionOutput
		data := allot(t, "version", "-o", format)
		if err := yaml.UnmarshalStrict([]byte(data), &out); err != nil { // YAML is a superset of JSON
			t.Fatalf("-o %s: %v\n%s", format, err, data)
		}
		if format == "json" && !json.Valid([]byte(data)) {
			t.Errorf("-o json printed invalid JSON:\n%s", data)
		}
		if out.ServerVersion == nil || *out.ServerVersion != *sv {
			t.Errorf("-o %s serverVersion %+v, want the server's /version %+v", format, out.ServerVersion, *sv)
		}
		c := out.ClientVersion
		if c == nil || c.GitVersion != sv.GitVersion || c.Major != version.KubernetesMajor || c.Minor != version.KubernetesMinor ||
			c.GoVersion == "" || c.Platform == "" {
			t.Errorf("-o %s clientVersion %+v, want gitVersion %s at API level %s.%s", format, c, sv.GitVersion,
				version.KubernetesMajor, version.KubernetesMinor)
		}
	}

	var out map[string]apiversion.Info
	data := allot(t, "version", "--client", "-o", "json")
	if err := json.Unmarshal([]byte(data), &out); err != nil {
		t.Fatal(err)
	}
	if _, hasServer := out["serverVersion"]; hasServer || len(out) != 1 || out["clientVersion"].GitVersion != sv.GitVersion {
		t.Errorf("--client -o json printed %s, want only clientVersion", data)
	}
	if stderr := allotFails(t, "version", "-o", "wide"); !strings.Contains(stderr, `unknown output format "wide"`) {
		t.Errorf("-o wide: stderr %q", stderr)
	}
}

// TestVersionCommandServerUnreachable: the client's version, then an
// error naming the server, exit code 1; --client does not ask.
func TestVersionCommandServerUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + l.Addr().String()
	l.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, "", "version", "--kubeconfig", kc)
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("err = %v, want exit code 1\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	lines := versionLines(t, r.stdout)
	if len(lines) != 1 || lines["Client Version"] == "" {
		t.Errorf("stdout %q, want only the client's version", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, server) {
		t.Errorf("stderr %q, want an error naming %s", r.stderr, server)
	}

	if out := allot(t, "version", "--client", "--kubeconfig", kc); !strings.HasPrefix(out, "Client Version: ") {
		t.Errorf("--client printed %q", out)
	}
}

// TestVersionFromLinkerFlag: the -ldflags -X flag that docs/operator-guide.md
// gives releases sets the version the client prints.
func TestVersionFromLinkerFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("links a second allot binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "allot")
	const ver = "v9.8.7-rc.1"
	build := exec.CommandContext(ctx, "go", "build", "-o", bin,
		"-ldflags", "-X allot.dev/allot/internal/version.version="+ver+
			" -X allot.dev/allot/internal/version.gitCommit=feedface"+
			" -X allot.dev/allot/internal/version.buildDate=2026-07-21T00:00:00Z",
		"allot.dev/allot/cmd/allot")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runTool(t, bin, "", "version", "--client", "-o", "json")
	if r.err != nil {
		t.Fatalf("version: %v\n%s", r.err, r.stderr)
	}
	var out versionOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	c := out.ClientVersion
	if c == nil || c.GitVersion != "v1.37.0+allot."+ver || c.GitCommit != "feedface" || c.BuildDate != "2026-07-21T00:00:00Z" {
		t.Errorf("clientVersion %+v, want gitVersion v1.37.0+allot.%s, commit feedface, build date 2026-07-21T00:00:00Z", c, ver)
	}

	lines := versionLines(t, runTool(t, bin, "", "version").stdout)
	if lines["Client Version"] != ver || lines["Server Version"] == ver || lines["Server Version"] == "" {
		t.Errorf("against the test cluster: %v, want Client Version %s and the cluster's own", lines, ver)
	}
}
