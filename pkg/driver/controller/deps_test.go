package controller

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPublicOnly pins the layering: the SDK is a public library, so it
// imports no allot internals, and the package states its contract in a
// doc comment.
func TestPublicOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	hasDoc := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if file.Doc != nil && strings.HasPrefix(file.Doc.Text(), "Package controller") {
			hasDoc = true
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "allot.dev/allot/internal/") || strings.HasPrefix(path, "allot.dev/allot/cmd/") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
	if !hasDoc {
		t.Error("package controller has no doc comment")
	}
}
