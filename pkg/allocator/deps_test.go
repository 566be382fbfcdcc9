package allocator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ioImports are packages the allocator and its simulation layer must not
// import: they are a pure core, used inside the scheduler and by tools.
var ioImports = []string{"os", "os/", "net", "net/", "io/fs", "io/ioutil", "syscall", "log", "log/", "unsafe", "plugin",
	"k8s.io/client-go/", "go.etcd.io/", "google.golang.org/grpc"}

// TestPureCore pins the layering: no I/O imports, no goroutines, and a
// package doc comment in every package.
func TestPureCore(t *testing.T) {
	for _, dir := range []string{"."} {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		hasDoc := false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil && strings.HasPrefix(file.Doc.Text(), "Package ") {
				hasDoc = true
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range ioImports {
					if path == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(path, bad)) {
						t.Errorf("%s imports %s", f, path)
					}
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if g, ok := n.(*ast.GoStmt); ok {
					t.Errorf("%s: go statement at %s", f, fset.Position(g.Pos()))
				}
				return true
			})
		}
		if !hasDoc {
			t.Errorf("package in %s has no doc comment", dir)
		}
	}
}
