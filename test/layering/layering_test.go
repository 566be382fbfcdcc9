package layering

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"allot.dev/allot/test/internal/testproc"
)

// The layering of the whole module, checked from its source in
// milliseconds: the walk parses each non-test file's imports and doc
// comment (whole files only where a rule forbids go statements), and
// asks the go command nothing. It replaces the copies of deps_test.go
// that the node agent, the scheduler, the dashboard, the allocator, the
// driver SDKs and the example drivers each kept.

const mod = "allot.dev/allot"

// A rule forbids imports, and with noGo go statements, in the non-test
// files of some directories. Test files may import anything: a test of a
// public package may start the internal server it is tested against.
type rule struct {
	name string
	why  string
	// dirs are module-relative and slash-separated: "d" is the directory d
	// only, "d/..." is d and every directory below it.
	dirs []string
	// forbid are import paths: "p" is the import p only, "p/" every import
	// below p (not p itself).
	forbid []string
	// allow are import paths, in forbid's syntax, that forbid would cover
	// but the rule admits.
	allow []string
	noGo  bool
}

var (
	storage   = []string{mod + "/internal/storage", mod + "/internal/storage/", mod + "/internal/apiserver", mod + "/internal/apiserver/", "go.etcd.io/"}
	apiClient = []string{mod + "/pkg/client", mod + "/pkg/client/", "k8s.io/client-go/"}
	network   = []string{"net", "net/"}
	// networkIO are the network packages that do I/O; net/netip and
	// net/url only parse values (the v1 CEL selector library's ip(),
	// cidr() and url() functions use them).
	networkIO  = []string{"net", "net/http", "net/http/", "net/rpc", "net/rpc/", "net/smtp", "net/textproto"}
	filesystem = []string{"os", "os/"}
)

// rules is the layering. Each rule has a permanent proof that it reports a
// violation (TestEveryRuleReports) and must name directories that exist
// (TestLayering).
var rules = []rule{{
	name:   "public-only",
	why:    "public packages (api, pkg, and the examples, written as a vendor's driver would be) import no allot internals and no command",
	dirs:   []string{"api/...", "pkg/...", "examples/..."},
	forbid: []string{mod + "/internal/", mod + "/cmd/"},
}, {
	name: "pure-core",
	why:  "the allocator, and the simulation that runs the scheduler's framework over it for `allot simulate`, are a pure core: no I/O, no goroutines",
	dirs: []string{"pkg/allocator/...", "internal/scheduler/simulate/..."},
	forbid: slices.Concat(filesystem, networkIO, []string{"io/fs", "io/ioutil", "syscall", "syscall/", "log", "log/", "unsafe", "plugin",
		mod + "/pkg/client", mod + "/pkg/client/", "k8s.io/client-go/", "go.etcd.io/", "google.golang.org/grpc", "google.golang.org/grpc/"}),
	noGo: true,
}, {
	name: "allocator-celenv",
	why: "the CEL environments and values of device selectors (pkg/allocator/celenv) are leaves of the allocator: they know no allot package " +
		"and no API type, so both front ends and the engine can use them (docs/decisions.md, issue 27)",
	dirs:   []string{"pkg/allocator/celenv/..."},
	forbid: []string{mod + "/", "k8s.io/api/"},
}, {
	name: "allocator-engine",
	why: "the allocation engine (pkg/allocator/engine: the one model, device-use state, request definition and search) knows no front end and " +
		"no allot API type, the seed's included: resource.k8s.io/v1's types are its vocabulary, and it imports only the CEL values and the " +
		"copy-on-write map (docs/decisions.md, issue 27)",
	dirs:   []string{"pkg/allocator/engine/..."},
	forbid: []string{mod + "/"},
	allow:  []string{mod + "/pkg/allocator/celenv", mod + "/pkg/allocator/internal/layered"},
}, {
	name:   "allocator-layered",
	why:    "the allocator's copy-on-write map (pkg/allocator/internal/layered) is a leaf: it knows no allot package",
	dirs:   []string{"pkg/allocator/internal/layered/..."},
	forbid: []string{mod + "/"},
}, {
	name:   "devicemaps-leaf",
	why:    "the shared device-map table (pkg/devicemaps) is used by pkg/client and the allocator, which may not import each other: it knows no allot package",
	dirs:   []string{"pkg/devicemaps/..."},
	forbid: []string{mod + "/"},
}, {
	name:   "apiserver-only",
	why:    "the scheduler, the node agent and the dashboard reach storage only through the API server",
	dirs:   []string{"internal/scheduler/...", "internal/node/...", "internal/dashboard/..."},
	forbid: storage,
}, {
	name:   "scheduler-decision-core",
	why:    "the scheduler's decision core (framework, plugins, queue, cache) does no I/O: no API client, no network, no files",
	dirs:   []string{"internal/scheduler/framework/...", "internal/scheduler/plugins/...", "internal/scheduler/queue/...", "internal/scheduler/cache/..."},
	forbid: slices.Concat(apiClient, network, filesystem),
}, {
	name: "scheduler-core-no-plugin",
	why: "the scheduler's core names no plugin: it builds frameworks through the plugins registry (internal/scheduler/plugins) and gets the plugins' " +
		"scheduler extensions (DRA: internal/scheduler/dra) through the extensions registry, and calls them through the framework's interfaces",
	dirs:   []string{"internal/scheduler"},
	forbid: []string{mod + "/internal/scheduler/plugins/", mod + "/internal/scheduler/dra", mod + "/internal/scheduler/dra/"},
}, {
	name:   "node-runtime-interface",
	why:    "the node agent and its pod workers reach runtimes only through the runtime interface; the command chooses the concrete runtime",
	dirs:   []string{"internal/node", "internal/node/pods"},
	forbid: []string{mod + "/internal/node/runtime/runc", mod + "/internal/node/runtime/fake"},
}, {
	name:   "node-pods-no-http",
	why:    "the pod worker does no HTTP of its own",
	dirs:   []string{"internal/node/pods"},
	forbid: []string{"net/http"},
}, {
	name:   "node-dra",
	why:    "the DRA manager speaks to drivers through the DRA node API only (not the driver SDK) and knows neither runtimes nor device plugins",
	dirs:   []string{"internal/node/dra"},
	forbid: []string{mod + "/internal/node/runtime/", mod + "/internal/node/devicemanager", mod + "/pkg/driver/"},
}, {
	name:   "node-no-api-client",
	why:    "the on-disk layout, the log server and the metrics know nothing of the API client",
	dirs:   []string{"internal/node/podfiles", "internal/node/logs", "internal/node/metrics"},
	forbid: apiClient,
}, {
	name:   "node-no-network",
	why:    "the on-disk layout and the metrics do no networking",
	dirs:   []string{"internal/node/podfiles", "internal/node/metrics"},
	forbid: network,
}, {
	name:   "node-metrics-no-files",
	why:    "the metrics read no files: collectors are given what they report",
	dirs:   []string{"internal/node/metrics"},
	forbid: filesystem,
}, {
	name: "upstream-dra-test-only",
	why: "k8s.io/dynamic-resource-allocation (Kubernetes' allocator, for the differential test test/dradiff) and k8s.io/apiserver, " +
		"which it pulls in, are test-only dependencies; the one exception is test/upstreamdriver, the proof driver built on " +
		"the upstream kubeletplugin library, which no shipped binary imports",
	dirs: []string{"api/...", "bench/...", "cmd/...", "examples/...", "internal/...", "pkg/...",
		"test/chaos/...", "test/dradiff/...", "test/e2e/...", "test/hosts/...", "test/internal/...", "test/layering/...", "test/setup/..."},
	forbid: []string{"k8s.io/dynamic-resource-allocation", "k8s.io/dynamic-resource-allocation/", "k8s.io/apiserver", "k8s.io/apiserver/"},
}}

// docRule is the rule every package follows: a doc comment, in a non-test
// file (where go doc and go list read it), that starts "Package NAME", or
// "Command DIR" for a command. A directory with only test files needs a
// doc.go too.
const docRule = "package-doc"

func (r rule) appliesTo(dir string) bool {
	for _, d := range r.dirs {
		if base, ok := strings.CutSuffix(d, "/..."); ok {
			if dir == base || strings.HasPrefix(dir, base+"/") {
				return true
			}
		} else if dir == d {
			return true
		}
	}
	return false
}

func (r rule) forbids(imp string) bool {
	return matchImport(r.forbid, imp) && !matchImport(r.allow, imp)
}

// matchImport reports whether imp is one of the paths (in rule.forbid's
// syntax).
func matchImport(paths []string, imp string) bool {
	for _, p := range paths {
		if imp == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(imp, p)) {
			return true
		}
	}
	return false
}

// pkgDir is what the walk learns of one directory holding Go files.
type pkgDir struct {
	name     string // package clause of the non-test files
	nonTest  bool
	hasDoc   bool
	firstDoc string // a doc comment that did not qualify, for the message
}

// check walks the module rooted at root (skipping testdata, vendor,
// directories Go ignores (names starting with . or _, such as _output),
// and nested modules) and returns one message per violation, sorted, and
// the module-relative directories holding Go files.
func check(root string, rules []rule) (violations []string, dirs map[string]bool, err error) {
	pkgs := map[string]*pkgDir{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module, with its own rules
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := path.Dir(rel)
		pkg := pkgs[dir]
		if pkg == nil {
			pkg = &pkgDir{}
			pkgs[dir] = pkg
		}
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		var applied []rule
		noGo := false
		for _, r := range rules {
			if r.appliesTo(dir) {
				applied = append(applied, r)
				noGo = noGo || r.noGo
			}
		}
		mode := parser.ImportsOnly | parser.ParseComments
		if noGo {
			mode = parser.ParseComments | parser.SkipObjectResolution
		}
		f, err := parser.ParseFile(fset, p, nil, mode)
		if err != nil {
			violations = append(violations, fmt.Sprintf("%s: %v", rel, err))
			return nil
		}
		pkg.name, pkg.nonTest = f.Name.Name, true
		if f.Doc != nil {
			if docNames(f.Doc.Text(), f.Name.Name, path.Base(dir)) {
				pkg.hasDoc = true
			} else if pkg.firstDoc == "" {
				pkg.firstDoc = strings.SplitN(f.Doc.Text(), "\n", 2)[0]
			}
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			for _, r := range applied {
				if r.forbids(ip) {
					violations = append(violations, fmt.Sprintf("%s imports %q: rule %s: %s", rel, ip, r.name, r.why))
				}
			}
		}
		for _, r := range applied {
			if !r.noGo {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if g, ok := n.(*ast.GoStmt); ok {
					violations = append(violations, fmt.Sprintf("%s:%d: go statement: rule %s: %s", rel, fset.Position(g.Pos()).Line, r.name, r.why))
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	dirs = map[string]bool{}
	for dir, pkg := range pkgs {
		dirs[dir] = true
		switch {
		case pkg.hasDoc:
		case !pkg.nonTest:
			violations = append(violations, fmt.Sprintf("%s: only test files, so go doc shows no package doc: add a doc.go with a doc comment: rule %s", dir, docRule))
		default:
			want := "Package " + pkg.name
			if pkg.name == "main" {
				want = "Command " + path.Base(dir)
			}
			msg := fmt.Sprintf("%s: package %s has no doc comment starting %q in a non-test file", dir, pkg.name, want)
			if pkg.firstDoc != "" {
				msg += fmt.Sprintf(" (found %q)", pkg.firstDoc)
			}
			violations = append(violations, msg+": rule "+docRule)
		}
	}
	slices.Sort(violations)
	return violations, dirs, nil
}

// docNames reports whether a doc comment names its package as Go's
// convention asks: "Package NAME ...", or "Command DIR ..." for a command.
func docNames(doc, name, dirBase string) bool {
	want := "Package " + name
	if name == "main" {
		want = "Command " + dirBase
	}
	rest, ok := strings.CutPrefix(doc, want)
	return ok && (rest == "" || strings.ContainsRune(" \t\n.,:;", rune(rest[0])))
}

// TestLayering checks the module's own tree: every rule holds, and every
// rule still names directories that exist (a moved package must take its
// rules along).
func TestLayering(t *testing.T) {
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	violations, dirs, err := check(root, rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations {
		t.Error(v)
	}
	for _, r := range rules {
		for _, d := range r.dirs {
			if !holdsPackage(dirs, d) {
				t.Errorf("rule %s names %s, which holds no Go package", r.name, d)
			}
		}
	}
	if !dirs["pkg/allocator"] || !dirs["cmd/allot"] || len(dirs) < 50 {
		t.Errorf("the walk from %s found %d package directories; want the whole module", root, len(dirs))
	}
}

// holdsPackage reports whether the rule directory d ("d" or "d/...")
// holds one of dirs.
func holdsPackage(dirs map[string]bool, d string) bool {
	in := rule{dirs: []string{d}}
	for dir := range dirs {
		if in.appliesTo(dir) {
			return true
		}
	}
	return false
}

// writeTree writes files (slash-separated relative path -> content) under
// a fresh module root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module " + mod + "\n"
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func goFile(pkg, doc string, imports ...string) string {
	var b strings.Builder
	if doc != "" {
		b.WriteString("// " + doc + "\n")
	}
	b.WriteString("package " + pkg + "\n")
	for _, imp := range imports {
		fmt.Fprintf(&b, "\nimport _ %q\n", imp)
	}
	return b.String()
}

func checkTree(t *testing.T, files map[string]string) []string {
	t.Helper()
	violations, _, err := check(writeTree(t, files), rules)
	if err != nil {
		t.Fatal(err)
	}
	return violations
}

// TestEveryRuleReports is each rule's proof that it can fail: in every
// directory a rule names (and one below it for "d/..."), a non-test file
// importing a path of each forbidden pattern, or with a go statement for a
// noGo rule, is reported, naming the file, the import and the rule; the
// same in a test file, a non-test file importing an allowed path, and the
// documented package beside them, are not.
func TestEveryRuleReports(t *testing.T) {
	for _, r := range rules {
		files := map[string]string{}
		var want []string
		for _, d := range r.dirs {
			dir, sub := strings.CutSuffix(d, "/...")
			targets := []string{dir}
			if sub {
				targets = append(targets, dir+"/sub")
			}
			for _, target := range targets {
				files[target+"/doc.go"] = goFile("p", "Package p is clean.")
				for i, pat := range r.forbid {
					imp := pat
					if strings.HasSuffix(pat, "/") {
						imp += "x"
					}
					bad := fmt.Sprintf("%s/bad%d.go", target, i)
					files[bad] = goFile("p", "", imp)
					files[fmt.Sprintf("%s/ok%d_test.go", target, i)] = goFile("p", "", imp)
					want = append(want, fmt.Sprintf("%s imports %q: rule %s: ", bad, imp, r.name))
				}
				// An allowed import is not reported (the check below:
				// every violation is about a bad file).
				for i, imp := range r.allow {
					if strings.HasSuffix(imp, "/") {
						imp += "x"
					}
					files[fmt.Sprintf("%s/allowed%d.go", target, i)] = goFile("p", "", imp)
				}
				if r.noGo {
					files[target+"/bad_go.go"] = "package p\n\nfunc f() {\n\tgo f()\n}\n"
					files[target+"/ok_go_test.go"] = "package p\n\nfunc g() { go g() }\n"
					want = append(want, fmt.Sprintf("%s/bad_go.go:4: go statement: rule %s: ", target, r.name))
				}
			}
		}
		got := checkTree(t, files)
		for _, w := range want {
			if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, w) }) {
				t.Errorf("rule %s: no violation starting %q", r.name, w)
			}
		}
		for _, v := range got {
			if !strings.Contains(v, "/bad") {
				t.Errorf("rule %s: violation %q is not about a bad file", r.name, v)
			}
		}
	}
}

// TestRuleScope checks where rules do not reach: a "d" rule not below d,
// patterns "p" and "p/" as documented, and what the walk skips.
func TestRuleScope(t *testing.T) {
	clean := func(dir string, imports ...string) map[string]string {
		return map[string]string{dir + "/a.go": goFile(path.Base(dir), "Package "+path.Base(dir)+" is here.", imports...)}
	}
	for name, files := range map[string]map[string]string{
		"an exact-directory rule does not reach below it":      clean("internal/node/dra/dratest", mod+"/pkg/driver/kubeletplugin"),
		"\"p/\" does not match p itself":                       clean("internal/node/dra", mod+"/internal/node/runtime"),
		"\"p\" does not match p's subpackages":                 clean("internal/node/pods", "net/http/httptest"),
		"a rule does not reach a sibling with a common prefix": clean("pkg/allocatorx", "os"),
		"internal packages may import internal ones":           clean("internal/dashboard", mod+"/internal/auth"),
		"testdata is skipped":                                  clean("pkg/x/testdata", mod+"/internal/y"),
		"vendor is skipped":                                    clean("vendor/x", mod+"/internal/y"),
		"_output is skipped":                                   clean("_output/pkg/x", mod+"/internal/y"),
		"hidden directories are skipped":                       clean("pkg/.cache/x", mod+"/internal/y"),
		"nested modules are skipped": {
			"pkg/tool/go.mod": "module example.com/tool\n",
			"pkg/tool/a.go":   goFile("tool", "", mod+"/internal/y"),
		},
		"a command documented as Command DIR": {"examples/my-driver/main.go": goFile("main", "Command my-driver runs.")},
		"a doc in one file of several":        {"pkg/x/a.go": goFile("x", ""), "pkg/x/doc.go": goFile("x", "Package x\n// is documented.")},
	} {
		if got := checkTree(t, files); len(got) != 0 {
			t.Errorf("%s: got %q, want no violations", name, got)
		}
	}
}

// TestDocRule is the package-doc rule's proof that it can fail.
func TestDocRule(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"no doc comment": {
			files: map[string]string{"internal/x/x.go": goFile("x", "")},
			want:  `internal/x: package x has no doc comment starting "Package x" in a non-test file: rule package-doc`,
		},
		"a doc comment that names no package": {
			files: map[string]string{"pkg/x/x.go": goFile("x", "Helpers for y.")},
			want:  `pkg/x: package x has no doc comment starting "Package x" in a non-test file (found "Helpers for y."): rule package-doc`,
		},
		"a doc comment naming another package": {
			files: map[string]string{"pkg/x/x.go": goFile("x", "Package xy does things.")},
			want:  `pkg/x: package x has no doc comment starting "Package x" in a non-test file (found "Package xy does things."): rule package-doc`,
		},
		"the doc comment only in a test file": {
			files: map[string]string{"pkg/x/x.go": goFile("x", ""), "pkg/x/x_test.go": goFile("x", "Package x is tested.")},
			want:  `pkg/x: package x has no doc comment starting "Package x" in a non-test file: rule package-doc`,
		},
		"a test-only directory without doc.go": {
			files: map[string]string{"test/x/x_test.go": goFile("x", "Package x tests things.")},
			want:  `test/x: only test files, so go doc shows no package doc: add a doc.go with a doc comment: rule package-doc`,
		},
		"a command documented as a package": {
			files: map[string]string{"cmd/tool/main.go": goFile("main", "Package main is a tool.")},
			want:  `cmd/tool: package main has no doc comment starting "Command tool" in a non-test file (found "Package main is a tool."): rule package-doc`,
		},
		"a file that does not parse": {
			files: map[string]string{"pkg/x/doc.go": goFile("x", "Package x is."), "pkg/x/x.go": "package x\n\nimport (\n"},
			want:  `pkg/x/x.go: `,
		},
	} {
		got := checkTree(t, tc.files)
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("%s: got %q, want one violation starting %q", name, got, tc.want)
		}
	}
}

// The walk fails loudly on an unreadable tree rather than passing.
func TestMissingRoot(t *testing.T) {
	_, _, err := check(filepath.Join(t.TempDir(), "absent"), rules)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("check(absent) = %v, want a not-exist error", err)
	}
}
