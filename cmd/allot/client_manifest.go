package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"allot.dev/allot/api/scheme"
)

// manifest is one object read from a file.
type manifest struct {
	source string // file name, or "STDIN"
	index  int    // 1-based document number in source
	gvk    schema.GroupVersionKind
	obj    *unstructured.Unstructured
}

func (m manifest) where() string { return fmt.Sprintf("%s document %d", m.source, m.index) }

// readManifests reads every -f argument: files, directories (their
// *.yaml, *.yml and *.json files, sorted by name) and "-" for stdin. Each
// document is decoded strictly first, so that a typo is reported with its
// file, document and field path before anything reaches the server. All
// problems are returned, not only the first.
func readManifests(paths []string, stdin io.Reader) ([]manifest, []error) {
	var out []manifest
	var errs []error
	for _, p := range paths {
		files, err := expandPath(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			ms, ferrs := readFile(f, stdin)
			out = append(out, ms...)
			errs = append(errs, ferrs...)
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no objects found in %s", strings.Join(paths, ", ")))
	}
	return out, errs
}

func expandPath(p string) ([]string, error) {
	if p == "-" {
		return []string{"-"}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", p, err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

func readFile(name string, stdin io.Reader) ([]manifest, []error) {
	src, r := name, stdin
	if name == "-" {
		src = "STDIN"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, []error{fmt.Errorf("read %s: %w", name, err)}
		}
		defer f.Close()
		r = f
	}
	docs, err := scheme.SplitYAML(r)
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w", src, err)}
	}
	var out []manifest
	var errs []error
	for i, doc := range docs {
		m, err := decodeManifest(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", src, i+1, err))
			continue
		}
		m.source, m.index = src, i+1
		out = append(out, m)
	}
	return out, errs
}

// decodeManifest checks a document against its kind strictly and returns
// it as unstructured, with numbers as int64 or float64 like kubectl.
func decodeManifest(doc []byte) (manifest, error) {
	_, gvk, err := scheme.Decode(doc)
	if err != nil {
		return manifest{}, err
	}
	j, err := scheme.ToJSON(doc)
	if err != nil {
		return manifest{}, err
	}
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, j)
	if err != nil {
		return manifest{}, fmt.Errorf("decode %s: %w", gvk.Kind, err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return manifest{}, fmt.Errorf("a %s cannot be applied", gvk.Kind)
	}
	if u.GetName() == "" {
		return manifest{}, fmt.Errorf("%s has no metadata.name", gvk.Kind)
	}
	return manifest{gvk: gvk, obj: u}, nil
}

// applyOrder puts namespaces first and CRDs next, so that the objects that
// live in them, or are of their kinds, find them; the order is otherwise
// kept.
func applyOrder(ms []manifest) {
	rank := func(m manifest) int {
		switch m.gvk.GroupKind() {
		case schema.GroupKind{Kind: "Namespace"}:
			return 0
		case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
			return 1
		}
		return 2
	}
	sort.SliceStable(ms, func(i, j int) bool { return rank(ms[i]) < rank(ms[j]) })
}
