package clienttest

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// Kubectl returns kubectl from PATH, else the one hack/setup.sh builds into
// <module root>/_output/bin, building it there first (the first build takes
// a few minutes) when it is missing, older than hack/tools/kubectl/go.mod,
// or built without KubectlLdflags' version. Debian has no kubectl package.
// The module root is the one of the working directory (go env GOMOD).
func Kubectl(ctx context.Context) (string, error) {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, nil
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 || string(bytes.TrimSpace(out)) == os.DevNull {
		return "", fmt.Errorf("kubectl is not on PATH, and no module root to build it in: go env GOMOD: %v", err)
	}
	root := filepath.Dir(string(bytes.TrimSpace(out)))
	bin := filepath.Join(root, "_output", "bin", "kubectl")
	src := filepath.Join(root, "hack", "tools", "kubectl")
	ldflags, err := KubectlLdflags(src)
	if err != nil {
		return "", err
	}
	if b, err := os.Stat(bin); err == nil && b.Mode().IsRegular() && b.Mode()&0o111 != 0 {
		if m, err := os.Stat(filepath.Join(src, "go.mod")); err == nil && !m.ModTime().After(b.ModTime()) && builtWithLdflags(bin, ldflags) {
			return bin, nil
		}
	}
	fmt.Fprintf(os.Stderr, "kubectl is not on PATH: building it into %s (the first time takes a few minutes)\n", bin)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Into a temporary name first: another test package or hack/setup.sh
	// may be building it at the same time.
	tmp := fmt.Sprintf("%s.tmp.%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags, "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("kubectl is not on PATH and building it from hack/tools/kubectl failed "+
			"(hack/setup.sh builds it too): %w\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return bin, nil
}

// kubectlRequire matches hack/tools/kubectl/go.mod's k8s.io/kubectl v0.X.Y
// line, in a require block or not.
var kubectlRequire = regexp.MustCompile(`(?m)^[ \t]*(?:require[ \t]+)?k8s\.io/kubectl[ \t]+v0\.([0-9]+)\.([0-9][^ \t\r\n]*)`)

// KubectlLdflags returns the -ldflags that give the kubectl built from src
// (hack/tools/kubectl) its version, as hack/setup.sh builds it:
// k8s.io/kubectl v0.X.Y in src's go.mod is Kubernetes v1.X.Y. Without them
// `kubectl version` says v0.0.0-master.
func KubectlLdflags(src string) (string, error) {
	gomod := filepath.Join(src, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	m := kubectlRequire.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s requires no k8s.io/kubectl v0.X.Y", gomod)
	}
	const pkg = "k8s.io/component-base/version"
	return fmt.Sprintf("-X %[1]s.gitVersion=v1.%[2]s.%[3]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[2]s", pkg, m[1], m[2]), nil
}

// builtWithLdflags reports whether the Go binary bin was built with exactly
// these -ldflags.
func builtWithLdflags(bin, ldflags string) bool {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-ldflags" {
			return s.Value == ldflags
		}
	}
	return false
}
