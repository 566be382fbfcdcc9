package scheduler

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden imports, by package directory prefix: the decision core does
// no I/O, and no scheduler package reaches storage except through the API
// server.
var forbidden = map[string][]string{
	".":         {"allot.dev/allot/internal/storage", "allot.dev/allot/internal/apiserver", "go.etcd.io/"},
	"framework": {"allot.dev/allot/pkg/client", "k8s.io/client-go/", "net", "net/", "os", "os/"},
	"plugins":   {"allot.dev/allot/pkg/client", "k8s.io/client-go/", "net", "net/", "os", "os/"},
	"queue":     {"allot.dev/allot/pkg/client", "k8s.io/client-go/", "net", "net/", "os", "os/"},
	"cache":     {"allot.dev/allot/pkg/client", "k8s.io/client-go/", "net", "net/", "os", "os/"},
}

// TestLayering pins the layering above and that every package states its
// contract in a doc comment.
func TestLayering(t *testing.T) {
	docs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		dir := filepath.Dir(path)
		if _, ok := docs[dir]; !ok {
			docs[dir] = false
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			return err
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package ") {
			docs[dir] = true
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range rulesFor(dir) {
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

func rulesFor(dir string) []string {
	out := forbidden["."]
	top := strings.Split(filepath.ToSlash(dir), "/")[0]
	if top != "." {
		out = append(append([]string(nil), out...), forbidden[top]...)
	}
	return out
}
