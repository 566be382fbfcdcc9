package setup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"allot.dev/allot/test/internal/testproc"
)

// progressGo is a stub go for hack/build-progress.sh: `go list` names 250
// packages, `go build -v` compiles them (one line each on stderr) or, with
// STUB_FAIL, prints a compiler error and fails.
const progressGo = `case "$1" in
list) i=0; while [ $i -lt 250 ]; do echo "example.com/p$i"; i=$((i+1)); done ;;
build)
  i=0; while [ $i -lt 250 ]; do echo "example.com/p$i" >&2; i=$((i+1)); done
  if [ -n "${STUB_FAIL:-}" ]; then echo "# example.com/p7" >&2; echo "p7/a.go:3:1: syntax error: unexpected }" >&2; exit 1; fi ;;
esac`

// runProgress runs the real hack/build-progress.sh with the stub go, its
// output not a terminal (as under CI or a pipe).
func runProgress(t *testing.T, fail bool) (string, error) {
	t.Helper()
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	repo, bin := t.TempDir(), t.TempDir()
	script, err := os.ReadFile(filepath.Join(root, "hack", "build-progress.sh"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "hack", "build-progress.sh"), script, 0o755)
	write(t, filepath.Join(bin, "go"), []byte("#!/bin/sh\n"+progressGo+"\n"), 0o755)
	cmd := exec.Command("bash", filepath.Join(repo, "hack", "build-progress.sh"), "-o", "bin/allot", "./cmd/allot")
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
	if fail {
		cmd.Env = append(cmd.Env, "STUB_FAIL=1")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBuildProgress: make run's build says what it does and how long a
// first build takes, reports progress while Go compiles, and its duration.
func TestBuildProgress(t *testing.T) {
	out, err := runProgress(t, false)
	if err != nil {
		t.Fatalf("build-progress: %v\n%s", err, out)
	}
	for _, want := range []string{
		"building bin/allot: the first build compiles up to 250 packages and takes a few minutes",
		"compiled 100/250 packages", "compiled 200/250 packages", "built bin/allot in ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "example.com/p"); n != 0 {
		t.Errorf("%d package names printed one per line; want progress lines only:\n%s", n, out)
	}
}

// TestBuildProgressPassesErrors: a failing build shows the compiler's
// error and fails.
func TestBuildProgressPassesErrors(t *testing.T) {
	out, err := runProgress(t, true)
	if err == nil {
		t.Fatalf("a failed build succeeded:\n%s", out)
	}
	if !strings.Contains(out, "p7/a.go:3:1: syntax error") || strings.Contains(out, "built bin/allot") {
		t.Fatalf("output %q: want the compiler error and no success line", out)
	}
}
