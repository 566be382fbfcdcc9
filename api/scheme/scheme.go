// Package scheme knows every built-in kind of allot and decodes manifests
// strictly: an unknown, duplicated or mistyped field is an error that names
// the field's path, never silently dropped. The CLI, `allot simulate`, the
// API server and tests all decode through here, so a manifest is judged the
// same way everywhere.
package scheme

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Scheme holds every built-in kind.
var Scheme = runtime.NewScheme()

// Codecs builds encoders and decoders for Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, resourcev1alpha2.AddToScheme, resourcev1.AddToScheme, apiextv1.AddToScheme,
		coordinationv1.AddToScheme,
	} {
		if err := add(Scheme); err != nil {
			panic(fmt.Sprintf("register kinds: %v", err))
		}
	}
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
}

// ToJSON converts a YAML document to JSON; JSON passes through unchanged so
// that duplicate keys are still seen by the strict decoder. Duplicate YAML
// keys are an error.
func ToJSON(data []byte) ([]byte, error) {
	t := bytes.TrimSpace(data)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return t, nil
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	return j, nil
}

// ErrMissingKind is returned for a document without apiVersion or kind.
var ErrMissingKind = errors.New("object has no apiVersion or kind")

// TypeOf reads apiVersion and kind of a JSON or YAML document.
func TypeOf(data []byte) (schema.GroupVersionKind, error) {
	j, err := ToJSON(data)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	var tm metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("read apiVersion and kind: %w", err)
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return schema.GroupVersionKind{}, ErrMissingKind
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("parse apiVersion %q: %w", tm.APIVersion, err)
	}
	return gv.WithKind(tm.Kind), nil
}

// Decode decodes one JSON or YAML document strictly. Built-in kinds become
// their typed objects; other kinds (custom resources) come back as
// *unstructured.Unstructured, to be checked against their CRD's schema.
func Decode(data []byte) (runtime.Object, schema.GroupVersionKind, error) {
	gvk, err := TypeOf(data)
	if err != nil {
		return nil, gvk, err
	}
	j, err := ToJSON(data)
	if err != nil {
		return nil, gvk, err
	}
	if !Scheme.Recognizes(gvk) {
		u := &unstructured.Unstructured{}
		if err := DecodeStrictInto(j, &u.Object); err != nil {
			return nil, gvk, err
		}
		return u, gvk, nil
	}
	obj, err := Scheme.New(gvk)
	if err != nil {
		return nil, gvk, fmt.Errorf("create %s: %w", gvk.Kind, err)
	}
	if err := DecodeStrictInto(j, obj); err != nil {
		return nil, gvk, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, gvk, nil
}

// StrictError lists every strict-decoding problem of one document.
type StrictError struct {
	Problems []string
}

func (e *StrictError) Error() string {
	return "strict decoding error: " + strings.Join(e.Problems, ", ")
}

// DecodeStrictInto unmarshals JSON into v and fails on unknown or duplicate
// fields, naming their paths (for example `unknown field
// "spec.containers[0].imagePolicy"`).
func DecodeStrictInto(data []byte, v any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if len(strictErrs) > 0 {
		se := &StrictError{}
		for _, e := range strictErrs {
			se.Problems = append(se.Problems, e.Error())
		}
		return se
	}
	return nil
}

// SplitYAML splits a multi-document YAML (or a JSON stream) into documents,
// dropping empty ones. A document that is a List (kind ending in "List" with
// items) is expanded into its items.
func SplitYAML(r io.Reader) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufioReader(r))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read YAML document %d: %w", len(docs)+1, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		items, err := expandList(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, items...)
	}
}

func expandList(doc []byte) ([][]byte, error) {
	gvk, err := TypeOf(doc)
	if err != nil || !strings.HasSuffix(gvk.Kind, "List") {
		return [][]byte{doc}, nil
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("parse list: %w", err)
	}
	var list struct {
		Items []runtime.RawExtension `json:"items"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &list); err != nil {
		return nil, fmt.Errorf("read list items: %w", err)
	}
	out := make([][]byte, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.Raw)
	}
	return out, nil
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}
