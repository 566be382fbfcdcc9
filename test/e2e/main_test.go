package e2e

import (
	"allot.dev/allot/test/internal/testproc"

	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Set by TestMain.
var (
	allotBin   string // the allot binary built from this module
	kubectlBin string // kubectl from PATH or _output/bin (findKubectl)
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "allot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if allotBin, err = testproc.BuildAllot(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if kubectlBin, err = findKubectl(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// findKubectl returns kubectl from PATH, else the one hack/setup.sh builds
// into <module root>/_output/bin, building it there first (once; the first
// build takes a few minutes) when it is missing, older than
// hack/tools/kubectl/go.mod or built without kubectlLdflags' version.
// Debian has no kubectl package.
func findKubectl() (string, error) {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, nil
	}
	root, err := testproc.ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "_output", "bin", "kubectl")
	src := filepath.Join(root, "hack", "tools", "kubectl")
	ldflags, err := kubectlLdflags(src)
	if err != nil {
		return "", err
	}
	if b, err := os.Stat(bin); err == nil && b.Mode().IsRegular() && b.Mode()&0o111 != 0 {
		if m, err := os.Stat(filepath.Join(src, "go.mod")); err == nil && !m.ModTime().After(b.ModTime()) && builtWithLdflags(bin, ldflags) {
			return bin, nil
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: kubectl is not on PATH: building it into %s (the first time takes a few minutes)\n", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
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

// kubectlLdflags returns the -ldflags that give the kubectl built from src
// (hack/tools/kubectl) its version, as hack/setup.sh builds it: k8s.io/kubectl
// v0.X.Y in src's go.mod is Kubernetes v1.X.Y. Without them `kubectl
// version` says v0.0.0-master.
func kubectlLdflags(src string) (string, error) {
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
