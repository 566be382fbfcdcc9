package node

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden imports, by package directory: the node agent reaches storage
// only through the API server; the on-disk layout, the log server and the
// metrics know nothing of the API client; runtimes are reached only
// through the runtime interface (concrete runtimes are chosen by the
// command); the DRA manager speaks to drivers through the DRA node API
// only (not the driver SDK) and knows neither runtimes nor device plugins.
var forbidden = map[string][]string{
	".":        {"allot.dev/allot/internal/storage", "allot.dev/allot/internal/apiserver", "go.etcd.io/", "allot.dev/allot/internal/node/runtime/runc", "allot.dev/allot/internal/node/runtime/fake"},
	"pods":     {"allot.dev/allot/internal/storage", "allot.dev/allot/internal/apiserver", "go.etcd.io/", "net/http", "allot.dev/allot/internal/node/runtime/runc", "allot.dev/allot/internal/node/runtime/fake"},
	"dra":      {"allot.dev/allot/internal/storage", "allot.dev/allot/internal/apiserver", "go.etcd.io/", "allot.dev/allot/internal/node/runtime/", "allot.dev/allot/internal/node/devicemanager", "allot.dev/allot/pkg/driver/"},
	"podfiles": {"allot.dev/allot/pkg/client", "k8s.io/client-go/", "net", "net/"},
	"logs":     {"allot.dev/allot/pkg/client", "k8s.io/client-go/"},
	"metrics":  {"allot.dev/allot/pkg/client", "k8s.io/client-go/", "net", "net/", "os"},
}

// TestLayering pins the layering above, and that every package of the
// agent states its contract in a doc comment. The runtime packages have
// their own owners and rules.
func TestLayering(t *testing.T) {
	docs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == "runtime" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.Dir(path)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		docs[dir] = docs[dir] || (f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden[dir] {
				if p == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(p, bad)) {
					t.Errorf("%s imports %s", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range docs {
		if !ok {
			t.Errorf("package in %s has no doc comment starting with \"Package \"", dir)
		}
	}
}
