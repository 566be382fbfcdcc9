package setup

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"allot.dev/allot/test/internal/testproc"
)

// The fake repository's go line: the script must read it from go.mod.
const wantGo = "1.26.8"

// The fake hack/tools/kubectl/go.mod, which requires k8s.io/kubectl
// v0.41.3 (not the real one's version: setup must read it from there).
const (
	kubectlGoMod = "module allot.dev/allot/hack/tools/kubectl\n\ngo " + wantGo + "\n\nrequire (\n" +
		"\tk8s.io/component-base v0.41.3\n\tk8s.io/kubectl v0.41.3\n)\n\nrequire github.com/x/y v1.0.0 // indirect\n"
	// The -ldflags setup builds that kubectl with: its version, else
	// `kubectl version` says v0.0.0-master.
	kubectlLdflags = "-X k8s.io/component-base/version.gitVersion=v1.41.3 " +
		"-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=41"
)

// realTools are the ordinary commands the script uses, linked into the
// stub PATH from the real one.
var realTools = []string{"cat", "dirname", "find", "mkdir", "mv", "sed", "sort", "tr", "uname"}

// stubs are small scripts that log how they were called ("NAME ARGS" lines,
// "go" with its working directory) to $STUB_LOG.
var stubs = map[string]string{
	"go": `echo "go $* (in $PWD)" >>"$STUB_LOG"
case "$1" in
env)
  if [ -n "${STUB_GO_ENV_ERROR:-}" ]; then echo "$STUB_GO_ENV_ERROR" >&2; exit 1; fi
  echo "$STUB_GOVERSION" ;;
build)
  # The binary records its -ldflags (one argument), as Go's do.
  ldflags=
  while [ $# -gt 0 ]; do
    case "$1" in -o) out=$2 ;; -ldflags) ldflags=$2 ;; esac
    shift
  done
  printf '#!/bin/sh\n' >"$out" && /bin/chmod +x "$out"
  if [ -n "$ldflags" ]; then printf '# -ldflags=%s\n' "$ldflags" >>"$out"; fi ;;
version)
  # go version -m FILE: prints the -ldflags FILE was built with, as Go does.
  [ "$2" = -m ] && sed -n 's/^# -ldflags=\(.*\)$/\tbuild\t-ldflags="\1"/p' "$3" ;;
esac`,
	"apt-get": `echo "apt-get $*" >>"$STUB_LOG"`,
	"id":      `echo "id $*" >>"$STUB_LOG"; echo "${STUB_UID:-0}"`,
	// sleep stands in for time passing while another apt holds its lock:
	// with STUB_RELEASE_LOCK set, the holder is gone after the first wait.
	"sleep": `echo "sleep $*" >>"$STUB_LOG"
if [ -n "${STUB_RELEASE_LOCK:-}" ]; then /bin/rm -rf "$ALLOT_SETUP_PROC"/*; fi`,
	"etcd":    `echo "etcd $*" >>"$STUB_LOG"`,
	"runc":    `echo "runc $*" >>"$STUB_LOG"`,
	"kubectl": `echo "kubectl $*" >>"$STUB_LOG"`,
}

// machine is a fake fresh machine: a copy of the repository's layout with
// the real hack/setup.sh, and a PATH of stubs.
type machine struct {
	repo, bin, log, proc string
	env                  map[string]string
}

// newMachine returns a machine where everything setup looks for is present
// (Go new enough, etcd, runc, busybox, chromium, kubectl, root) and apt
// is idle; tests take away what they need missing.
func newMachine(t *testing.T) *machine {
	t.Helper()
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "setup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := &machine{
		repo: filepath.Join(dir, "repo"), bin: filepath.Join(dir, "bin"),
		log: filepath.Join(dir, "log"), proc: filepath.Join(dir, "proc"),
	}
	write(t, filepath.Join(m.repo, "hack", "setup.sh"), script, 0o755)
	write(t, filepath.Join(m.repo, "go.mod"), []byte("module allot.dev/allot\n\ngo "+wantGo+"\n"), 0o644)
	write(t, filepath.Join(m.repo, "hack", "tools", "kubectl", "go.mod"), []byte(kubectlGoMod), 0o644)
	write(t, filepath.Join(dir, "busybox"), []byte("#!/bin/sh\n"), 0o755)
	write(t, filepath.Join(dir, "chromium"), []byte("#!/bin/sh\n"), 0o755)
	write(t, m.log, nil, 0o644)
	for _, d := range []string{m.proc, m.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range realTools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("the test needs %s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(m.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range stubs {
		write(t, filepath.Join(m.bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755)
	}
	m.env = map[string]string{
		"PATH": m.bin, "HOME": dir, "STUB_LOG": m.log, "STUB_GOVERSION": "go" + wantGo, "STUB_UID": "0",
		"ALLOT_SETUP_BUSYBOX": filepath.Join(dir, "busybox"), "ALLOT_SETUP_CHROMIUM": filepath.Join(dir, "chromium"),
		"ALLOT_SETUP_PROC": m.proc, "ALLOT_SETUP_LOCK_WAIT": "600", "ALLOT_SETUP_LOCK_POLL": "5",
	}
	return m
}

func write(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

// remove takes a command off the machine's PATH.
func (m *machine) remove(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.Remove(filepath.Join(m.bin, n)); err != nil {
			t.Fatal(err)
		}
	}
}

// holdLock makes process 4242 (unattended-upgr) hold dpkg's frontend lock.
func (m *machine) holdLock(t *testing.T) {
	t.Helper()
	write(t, filepath.Join(m.proc, "4242", "comm"), []byte("unattended-upgr\n"), 0o644)
	if err := os.MkdirAll(filepath.Join(m.proc, "4242", "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/var/lib/dpkg/lock-frontend", filepath.Join(m.proc, "4242", "fd", "3")); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	stdout, stderr string
	calls          []string // the stubs' log, one call a line
	exitCode       int
}

// run runs bash hack/setup.sh ARGS from outside the repository, with only
// the machine's environment.
func (m *machine) run(t *testing.T, args ...string) result {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, append([]string{filepath.Join(m.repo, "hack", "setup.sh")}, args...)...)
	cmd.Dir = t.TempDir()
	for k, v := range m.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("hack/setup.sh did not finish in 20s\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.exitCode = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	log, err := os.ReadFile(m.log)
	if err != nil {
		t.Fatal(err)
	}
	r.calls = strings.Split(strings.TrimSpace(string(log)), "\n")
	return r
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.exitCode) + "\nstdout:\n" + r.stdout + "stderr:\n" + r.stderr +
		"calls:\n" + strings.Join(r.calls, "\n")
}

// called returns the logged calls that start with prefix.
func (r result) called(prefix string) []string {
	var out []string
	for _, c := range r.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func requireContains(t *testing.T, r result, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not say %q\n%s", what, w, r)
		}
	}
}

// requireGoHelp checks that a Go failure stops setup before anything else
// and says how to install a new enough Go.
func requireGoHelp(t *testing.T, r result, wants ...string) {
	t.Helper()
	if r.exitCode == 0 {
		t.Fatalf("setup succeeded\n%s", r)
	}
	requireContains(t, r, "stderr", r.stderr, append(wants,
		"Go "+wantGo+" or newer", "https://go.dev/dl/", "go"+wantGo+".linux-",
		"tar -C /usr/local -xzf", "export PATH=/usr/local/go/bin:$PATH")...)
	if c := append(r.called("apt-get"), r.called("go build")...); len(c) > 0 {
		t.Errorf("setup went on after the Go check: %q\n%s", c, r)
	}
}

func TestSetupGoMissing(t *testing.T) {
	m := newMachine(t)
	m.remove(t, "go")
	r := m.run(t)
	requireGoHelp(t, r, "Go is not on PATH")
}

func TestSetupGoVersion(t *testing.T) {
	for _, tc := range []struct {
		goVersion string
		ok        bool
	}{
		{"go1.25.9", false},
		{"go1.26.7", false},
		{"go1.26rc1", false},
		{"go1.3", false},
		{"go" + wantGo, true},
		{"go1.26.10", true},
		{"go1.27rc2", true},
		{"go2.0.0", true},
	} {
		t.Run(tc.goVersion, func(t *testing.T) {
			m := newMachine(t)
			m.env["STUB_GOVERSION"] = tc.goVersion
			r := m.run(t)
			if tc.ok {
				if r.exitCode != 0 {
					t.Fatalf("setup failed with %s\n%s", tc.goVersion, r)
				}
				return
			}
			requireGoHelp(t, r, "is "+tc.goVersion+"; allot needs Go "+wantGo+" or newer")
		})
	}
}

// A Go that may not switch toolchains (GOTOOLCHAIN=local) fails `go env`
// in the module: setup passes on why and how to fix it.
func TestSetupGoCannotSwitchToolchain(t *testing.T) {
	m := newMachine(t)
	m.env["STUB_GO_ENV_ERROR"] = "go: go.mod requires go >= " + wantGo + " (running go 1.24.0; GOTOOLCHAIN=local)"
	r := m.run(t)
	requireGoHelp(t, r, "cannot build this module", "GOTOOLCHAIN=local")
}

func TestSetupBuildsKubectl(t *testing.T) {
	m := newMachine(t)
	m.remove(t, "kubectl")
	r := m.run(t, "--test")
	if r.exitCode != 0 {
		t.Fatalf("setup failed\n%s", r)
	}
	requireContains(t, r, "stdout", r.stdout,
		"setup: building kubectl from the Go module proxy (first time takes a few minutes)",
		"kubectl is at "+filepath.Join(m.repo, "_output", "bin", "kubectl"))
	builds := r.called("go build")
	if len(builds) != 1 || !regexp.MustCompile(`^go build -ldflags .* -o \.\./\.\./\.\./_output/bin/kubectl\.tmp\.\d+ \. \(in .*/hack/tools/kubectl\)$`).MatchString(builds[0]) {
		t.Errorf("want one go build of hack/tools/kubectl into _output/bin, got %q\n%s", builds, r)
	}
	requireKubectlLdflags(t, m, kubectlLdflags)
	if c := r.called("apt-get"); len(c) > 0 {
		t.Errorf("apt-get ran with every package present: %q", c)
	}
	if len(r.called("go mod download")) != 1 {
		t.Errorf("no go mod download\n%s", r)
	}

	// Again: the kubectl built before is used, not rebuilt.
	if err := os.Truncate(m.log, 0); err != nil {
		t.Fatal(err)
	}
	r = m.run(t, "--test")
	if r.exitCode != 0 || len(r.called("go build")) > 0 {
		t.Fatalf("second run: want success without a build\n%s", r)
	}
	requireContains(t, r, "stdout", r.stdout, "setup: using "+filepath.Join(m.repo, "_output", "bin", "kubectl"))
}

// requireKubectlLdflags checks that setup built an executable
// _output/bin/kubectl with these -ldflags, passed as one argument.
func requireKubectlLdflags(t *testing.T, m *machine, want string) {
	t.Helper()
	bin := filepath.Join(m.repo, "_output", "bin", "kubectl")
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("no executable _output/bin/kubectl: %v", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := regexp.MustCompile(`(?m)^# -ldflags=(.*)$`).FindStringSubmatch(string(data)); got == nil || got[1] != want {
		t.Errorf("kubectl built with -ldflags %q, want %q", got, want)
	}
}

// The built kubectl's version comes from hack/tools/kubectl/go.mod's
// k8s.io/kubectl line: v0.X.Y is Kubernetes v1.X.Y.
func TestSetupKubectlVersion(t *testing.T) {
	const pkg = "k8s.io/component-base/version"
	for _, tc := range []struct {
		name, gomod, ldflags string
	}{
		{"require block", kubectlGoMod, kubectlLdflags},
		{"require line", "module m\n\nrequire k8s.io/kubectl v0.38.10\n",
			"-X " + pkg + ".gitVersion=v1.38.10 -X " + pkg + ".gitMajor=1 -X " + pkg + ".gitMinor=38"},
		{"pre-release", "module m\n\nrequire (\n\tk8s.io/kubectl v0.39.0-alpha.1\n)\n",
			"-X " + pkg + ".gitVersion=v1.39.0-alpha.1 -X " + pkg + ".gitMajor=1 -X " + pkg + ".gitMinor=39"},
		{"no kubectl", "module m\n\nrequire k8s.io/kubectl-tools v0.41.3\n", ""},
		{"not v0", "module m\n\nrequire k8s.io/kubectl v1.41.3\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			m.remove(t, "kubectl")
			write(t, filepath.Join(m.repo, "hack", "tools", "kubectl", "go.mod"), []byte(tc.gomod), 0o644)
			r := m.run(t)
			if tc.ldflags == "" {
				if r.exitCode == 0 {
					t.Fatalf("setup succeeded without a k8s.io/kubectl v0.X.Y\n%s", r)
				}
				requireContains(t, r, "stderr", r.stderr, "hack/tools/kubectl/go.mod requires no k8s.io/kubectl v0.X.Y")
				if c := r.called("go build"); len(c) > 0 {
					t.Errorf("setup built kubectl without a version: %q", c)
				}
				return
			}
			if r.exitCode != 0 {
				t.Fatalf("setup failed\n%s", r)
			}
			requireKubectlLdflags(t, m, tc.ldflags)
		})
	}
}

// A kubectl built before setup passed the version flags (it says
// v0.0.0-master), or with another version's, is built again though it is
// newer than its go.mod.
func TestSetupRebuildsKubectlWithoutVersion(t *testing.T) {
	for name, old := range map[string]string{
		"no ldflags":    "#!/bin/sh\n",
		"other version": "#!/bin/sh\n# -ldflags=" + strings.ReplaceAll(kubectlLdflags, "41", "40") + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			m := newMachine(t)
			m.remove(t, "kubectl")
			write(t, filepath.Join(m.repo, "_output", "bin", "kubectl"), []byte(old), 0o755)
			r := m.run(t)
			if r.exitCode != 0 {
				t.Fatalf("setup failed\n%s", r)
			}
			if len(r.called("go build")) != 1 {
				t.Errorf("want kubectl built again, got builds %q\n%s", r.called("go build"), r)
			}
			requireKubectlLdflags(t, m, kubectlLdflags)
		})
	}
}

func TestSetupKubectlOnPath(t *testing.T) {
	m := newMachine(t)
	r := m.run(t, "--test")
	if r.exitCode != 0 {
		t.Fatalf("setup failed\n%s", r)
	}
	if c := append(r.called("go build"), r.called("apt-get")...); len(c) > 0 {
		t.Errorf("with everything present setup ran %q\n%s", c, r)
	}
}

func TestSetupMissingPackagesNotRoot(t *testing.T) {
	m := newMachine(t)
	m.remove(t, "etcd", "runc", "kubectl")
	m.env["ALLOT_SETUP_BUSYBOX"] = filepath.Join(m.repo, "no-busybox")
	m.env["ALLOT_SETUP_CHROMIUM"] = filepath.Join(m.repo, "no-chromium")
	m.env["STUB_UID"] = "1000"
	r := m.run(t, "--test")
	if r.exitCode == 0 {
		t.Fatalf("setup succeeded without root and packages\n%s", r)
	}
	requireContains(t, r, "stderr", r.stderr,
		"missing Debian packages etcd-server runc busybox-static chromium", "as root",
		"apt-get install etcd-server runc busybox-static chromium")
	if strings.Contains(r.stderr, "kubectl") {
		t.Errorf("setup asks for a kubectl package, which Debian does not have\n%s", r)
	}
	if c := r.called("apt-get"); len(c) > 0 {
		t.Errorf("apt-get ran without root: %q", c)
	}
}

func TestSetupInstallsPackagesAsRoot(t *testing.T) {
	m := newMachine(t)
	m.remove(t, "etcd", "kubectl")
	m.env["ALLOT_SETUP_CHROMIUM"] = filepath.Join(m.repo, "no-chromium")
	r := m.run(t) // without --test: no chromium
	if r.exitCode != 0 {
		t.Fatalf("setup failed\n%s", r)
	}
	apt := r.called("apt-get")
	want := []string{
		"apt-get -o DPkg::Lock::Timeout=600 update -qq",
		"apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends etcd-server",
	}
	if strings.Join(apt, "\n") != strings.Join(want, "\n") {
		t.Errorf("apt-get calls:\n%s\nwant:\n%s", strings.Join(apt, "\n"), strings.Join(want, "\n"))
	}
	if len(r.called("go build")) != 1 {
		t.Errorf("kubectl was not built\n%s", r)
	}
}

func TestSetupWaitsForDpkgLock(t *testing.T) {
	m := newMachine(t)
	m.remove(t, "runc")
	m.holdLock(t)
	m.env["STUB_RELEASE_LOCK"] = "1"
	r := m.run(t)
	if r.exitCode != 0 {
		t.Fatalf("setup failed\n%s", r)
	}
	requireContains(t, r, "stderr", r.stderr, "setup: waiting for apt/dpkg, held by 4242 (unattended-upgr)")
	got := strings.Join(append(r.called("sleep"), r.called("apt-get")...), "\n")
	want := "sleep 5\napt-get -o DPkg::Lock::Timeout=600 update -qq\n" +
		"apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends runc"
	if got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	// The sleep came before apt-get.
	if i := strings.Index(strings.Join(r.calls, "\n"), "sleep"); i < 0 || i > strings.Index(strings.Join(r.calls, "\n"), "apt-get") {
		t.Errorf("apt-get ran before the lock was free\n%s", r)
	}
}

func TestSetupGivesUpOnDpkgLock(t *testing.T) {
	m := newMachine(t)
	m.remove(t, "runc")
	m.holdLock(t)
	m.env["ALLOT_SETUP_LOCK_WAIT"] = "3"
	m.env["ALLOT_SETUP_LOCK_POLL"] = "1"
	r := m.run(t)
	if r.exitCode == 0 {
		t.Fatalf("setup succeeded with apt busy\n%s", r)
	}
	requireContains(t, r, "stderr", r.stderr, "apt/dpkg still busy after 3s (held by 4242 (unattended-upgr))")
	if n := len(r.called("sleep 1")); n != 3 {
		t.Errorf("slept %d times, want 3\n%s", n, r)
	}
	if c := r.called("apt-get"); len(c) > 0 {
		t.Errorf("apt-get ran while apt was busy: %q", c)
	}
}

// requireRe matches "PATH VERSION" in a go.mod's require lines, in a block
// or not.
var requireRe = regexp.MustCompile(`(?m)^(?:require\s+)?\s*(\S+)\s+(v\S+)(?:\s*//.*)?$`)

// required returns the version of module path that gomod requires.
func required(gomod, path string) string {
	for _, m := range requireRe.FindAllStringSubmatch(gomod, -1) {
		if m[1] == path {
			return m[2]
		}
	}
	return ""
}

func TestRequired(t *testing.T) {
	gomod := "module x\n\ngo 1.26\n\nrequire k8s.io/a v0.1.0\n\nrequire (\n\tk8s.io/b v0.2.0\n\tk8s.io/c v0.3.0 // indirect\n)\n"
	for path, want := range map[string]string{"k8s.io/a": "v0.1.0", "k8s.io/b": "v0.2.0", "k8s.io/c": "v0.3.0", "k8s.io/d": ""} {
		if got := required(gomod, path); got != want {
			t.Errorf("required(%s) = %q, want %q", path, got, want)
		}
	}
}

// hack/tools/kubectl builds kubectl at allot's client-go version: a
// client-go bump must bump k8s.io/kubectl with it.
func TestKubectlFollowsClientGo(t *testing.T) {
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mainMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	tools, err := os.ReadFile(filepath.Join(root, "hack", "tools", "kubectl", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	clientGo := required(string(mainMod), "k8s.io/client-go")
	if clientGo == "" {
		t.Fatal("go.mod requires no k8s.io/client-go")
	}
	for _, path := range []string{"k8s.io/kubectl", "k8s.io/client-go"} {
		if got := required(string(tools), path); got != clientGo {
			t.Errorf("hack/tools/kubectl/go.mod requires %s %q, but allot's go.mod has k8s.io/client-go %s: "+
				"run (cd hack/tools/kubectl && go get k8s.io/kubectl@%s && go mod tidy)", path, got, clientGo, clientGo)
		}
	}
}
