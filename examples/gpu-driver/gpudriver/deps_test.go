package gpudriver

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPublicOnly pins the layering: an example driver uses only allot's
// public packages, as a vendor's driver would.
func TestPublicOnly(t *testing.T) {
	for _, dir := range []string{".", ".."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(path, "allot.dev/allot/internal/") || strings.HasPrefix(path, "allot.dev/allot/cmd/") {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
