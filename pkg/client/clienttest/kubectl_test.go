package clienttest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKubectlLdflags: k8s.io/kubectl v0.X.Y is Kubernetes v1.X.Y, in a
// require block or a single require line; a go.mod without it is an error.
func TestKubectlLdflags(t *testing.T) {
	const want = "-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	for name, gomod := range map[string]string{
		"block":  "module m\n\nrequire (\n\tk8s.io/component-base v0.37.2\n\tk8s.io/kubectl v0.37.2\n)\n",
		"single": "module m\n\nrequire k8s.io/kubectl v0.37.2\n",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := KubectlLdflags(dir); err != nil || got != want {
			t.Errorf("%s: KubectlLdflags = %q, %v; want %q", name, got, err, want)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := KubectlLdflags(dir); err == nil {
		t.Error("a go.mod without k8s.io/kubectl: no error")
	}
}
